//! The markdown tables and the TOML example say what the declarations say.

use super::*;
use crate::keys::{ByteSize, Section, document};

fn common() -> SectionDoc {
    SectionDoc {
        header: "[sinks.NAME]",
        type_name: None,
        about: "The keys every sink has.",
        built: true,
        keys: document(|mut s| {
            let _ = s
                .key("type", "The sink type.")
                .required()
                .example("lake")
                .raw(r#"one of "lake" | "sea""#);
            let _ = s
                .key("inputs", "Sources it reads.")
                .required()
                .example(vec!["gen"])
                .raw("list of source names");
            let _ = s.key("required", "Whether retention waits.").or(true);
        }),
    }
}

fn lake() -> SectionDoc {
    fn parse(s: &mut Section<'_>) {
        let _: Option<String> = s.key("path", "Where.").example("./out").req("");
        if let Some(mut t) = s.key("rotate", "When files close.").table() {
            let _ = t.key("bytes", "Size of a file.").or(ByteSize::mib(128));
            t.finish();
        }
        let _: Option<u64> = s
            .key("rate", "Records per second.")
            .unit("records per second")
            .default_text("unlimited")
            .example(500)
            .opt();
    }
    SectionDoc {
        header: "[sinks.NAME]",
        type_name: Some("lake"),
        about: "A lake.",
        built: true,
        keys: document(|mut s| parse(&mut s)),
    }
}

#[test]
fn markdown_has_a_linked_heading_and_a_table_per_section() {
    let text = markdown("# Reference", &[common(), lake()]);
    let expected = r#"# Reference

- [Every sink: `[sinks.NAME]`](#every-sink-sinksname)
  - [Sink `lake`](#sink-lake)

## Every sink: `[sinks.NAME]`

The keys every sink has.

| key | type | default | required | unit | description | example |
|---|---|---|---|---|---|---|
| `type` | one of "lake" \| "sea" |  | yes |  | The sink type. | `type = "lake"` |
| `inputs` | list of source names |  | yes |  | Sources it reads. | `inputs = ["gen"]` |
| `required` | boolean | `true` |  |  | Whether retention waits. | `required = true` |

### Sink `lake`

A lake.

Under `[sinks.NAME]` with `type = "lake"`, besides the keys every sink has.

| key | type | default | required | unit | description | example |
|---|---|---|---|---|---|---|
| `path` | string |  | yes |  | Where. | `path = "./out"` |
| `rotate` | table |  |  |  | When files close. |  |
| `rotate.bytes` | size ("8 MiB") | `"128 MiB"` |  |  | Size of a file. | `rotate.bytes = "128 MiB"` |
| `rate` | integer ≥ 0 | unlimited |  | records per second | Records per second. | `rate = 500` |
"#;
    assert_eq!(text, expected);
}

#[test]
fn the_toml_example_sets_required_keys_and_comments_out_the_rest() {
    let text = toml_example(&common(), &lake());
    let expected = r#"# A sink of type "lake".
# A lake.
# Required keys are set to an example; the others are commented out at their default.
[sinks.lake]
# The sink type.
type = "lake"
# Sources it reads.
inputs = ["gen"]
# Where.
path = "./out"
# rotate: When files close.
# Size of a file.
# rotate.bytes = "128 MiB"
# Records per second. Unit: records per second. Default: unlimited.
# rate = 500

# The keys every sink has:
# Whether retention waits.
# required = true
"#;
    assert_eq!(text, expected);
    let uncommented = text.replace("# rotate.bytes", "rotate.bytes");
    let table: toml::Table = uncommented.parse().expect("valid TOML");
    assert_eq!(
        table["sinks"]["lake"]["rotate"]["bytes"].as_str(),
        Some("128 MiB")
    );
}
