//! `cos`: the command-line face of createos-sandbox.

fn main() -> std::process::ExitCode {
    cos::cli::main()
}
