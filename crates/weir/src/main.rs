//! The `weir` command line: parses it and hands it to the library.

fn main() -> std::process::ExitCode {
    weir::cmd::main()
}
