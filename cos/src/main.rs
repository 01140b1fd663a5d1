//! `cos`: the command-line face of createos-sandbox.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
