//! Rendering the reference: every section's keys as markdown tables, and one section as a
//! commented TOML example. Both are made from the [`SectionDoc`]s of the documenting
//! walk, so they say what the parse code reads.

use std::fmt::Write as _;

use super::declare::{KeyDoc, SectionDoc};

/// The reference as markdown: `intro` (a title and a few paragraphs), a list of the
/// sections with links, then one heading and one table of keys per section.
pub fn markdown(intro: &str, sections: &[SectionDoc]) -> String {
    let mut out = String::new();
    out.push_str(intro.trim_end());
    out.push_str("\n\n");
    for section in sections {
        let title = title(section);
        let indent = if section.type_name.is_some() {
            "  "
        } else {
            ""
        };
        let _ = writeln!(out, "{indent}- [{title}](#{})", anchor(&title));
    }
    for section in sections {
        let level = if section.type_name.is_some() {
            "###"
        } else {
            "##"
        };
        let _ = write!(out, "\n{level} {}\n\n", title(section));
        if !section.about.is_empty() {
            let _ = write!(out, "{}\n\n", section.about);
        }
        if let Some(type_name) = section.type_name {
            let _ = write!(
                out,
                "Under `{}` with `type = \"{type_name}\"`, besides the keys every {} has.\n\n",
                section.header,
                component(section)
            );
        }
        out.push_str("| key | type | default | required | unit | description | example |\n");
        out.push_str("|---|---|---|---|---|---|---|\n");
        for key in &section.keys {
            row(&mut out, key);
        }
    }
    out
}

/// A commented TOML section for one source or sink type: `common` is the section of the
/// keys every source (or sink) has, `own` the type's. Required keys are set to their
/// example; the others are commented out at their default (or an example). The table
/// is named after the type: `[sinks.parquet]`.
pub fn toml_example(common: &SectionDoc, own: &SectionDoc) -> String {
    let type_name = own.type_name.unwrap_or_default();
    let group = common
        .header
        .trim_start_matches('[')
        .split('.')
        .next()
        .unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "# A {} of type \"{type_name}\".", component(own));
    if !own.about.is_empty() {
        comment(&mut out, own.about);
    }
    comment(
        &mut out,
        "Required keys are set to an example; the others are commented out at their default.",
    );
    let _ = writeln!(out, "[{group}.{type_name}]");
    let (required, optional): (Vec<&KeyDoc>, Vec<&KeyDoc>) =
        common.keys.iter().partition(|key| is_set(key));
    for key in required {
        if key.name == "type" {
            comment(&mut out, key.description);
            let _ = writeln!(out, "type = \"{type_name}\"");
        } else {
            assignment(&mut out, key);
        }
    }
    for key in &own.keys {
        assignment(&mut out, key);
    }
    if !optional.is_empty() {
        let _ = writeln!(out, "\n# The keys every {} has:", component(own));
        for key in optional {
            assignment(&mut out, key);
        }
    }
    out
}

/// `Source \`http\``, `[runtime]`, `Every source: [sources.NAME]`.
fn title(section: &SectionDoc) -> String {
    match section.type_name {
        Some(type_name) if section.built => {
            format!("{} `{type_name}`", capitalized(component(section)))
        }
        Some(type_name) => format!(
            "{} `{type_name}` (not built yet)",
            capitalized(component(section))
        ),
        None if section.header.contains(".NAME") => {
            format!("Every {}: `{}`", component(section), section.header)
        }
        None => format!("`{}`", section.header),
    }
}

/// `source` or `sink`, for a component's section.
fn component(section: &SectionDoc) -> &'static str {
    if section.header.starts_with("[sinks") {
        "sink"
    } else {
        "source"
    }
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The anchor GitHub gives a heading: lower case, punctuation but `-` and `_` dropped,
/// spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// One key's row of a section's table.
fn row(out: &mut String, key: &KeyDoc) {
    let default = match (&key.default_text, &key.default) {
        (Some(text), _) => (*text).to_owned(),
        (None, Some(value)) => format!("`{value}`"),
        (None, None) => String::new(),
    };
    let example = match key.example() {
        None => String::new(),
        _ if key.is_table => String::new(),
        // An element's key is written inside its table: `{ qos = 1 }`.
        Some(value) if key.name.contains("[]") => format!("`{value}`"),
        Some(value) => format!("`{} = {value}`", key.name),
    };
    let description = if key.description.is_empty() {
        "(not described yet)"
    } else {
        key.description
    };
    let cells = [
        format!("`{}`", key.name),
        key.kind.to_string(),
        default,
        match (key.required, key.required_unless) {
            (true, _) => "yes".to_owned(),
            (false, Some(other)) => format!("unless `{other}`"),
            (false, None) => String::new(),
        },
        key.unit.unwrap_or_default().to_owned(),
        description.to_owned(),
        example,
    ];
    out.push('|');
    for cell in cells {
        let _ = write!(out, " {} |", cell.replace('|', "\\|"));
    }
    out.push('\n');
}

/// A key of the TOML example: its description as a comment, then `name = value`,
/// commented out unless it is required. A table gives its description only (its keys
/// follow as `table.key`); the keys of a list's elements (`topics[].qos`) are described
/// only, their parent's example shows their form.
fn assignment(out: &mut String, key: &KeyDoc) {
    let mut about = if key.description.is_empty() {
        key.name.clone()
    } else {
        key.description.to_owned()
    };
    if let Some(unit) = key.unit {
        let _ = write!(about, " Unit: {unit}.");
    }
    if key.is_table || key.name.contains("[]") {
        comment(out, &format!("{}: {about}", key.name));
        return;
    }
    if let Some(text) = key.default_text {
        let _ = write!(about, " Default: {text}.");
    }
    comment(out, &about);
    match key.example() {
        Some(value) if is_set(key) => {
            let _ = writeln!(out, "{} = {value}", key.name);
        }
        Some(value) => {
            let _ = writeln!(out, "# {} = {value}", key.name);
        }
        None => {
            let required = if is_set(key) { "required, " } else { "" };
            let _ = writeln!(out, "# {} = ({required}no example yet)", key.name);
        }
    }
}

/// Whether the example sets the key: it is required, or one of two that are.
fn is_set(key: &KeyDoc) -> bool {
    key.required || key.required_unless.is_some()
}

/// `text` as `# ` comment lines.
fn comment(out: &mut String, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "# {line}");
    }
}

#[cfg(test)]
mod tests;
