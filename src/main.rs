//! The binary: all of it is the library's [`duduclaw_session::main`].

fn main() -> std::process::ExitCode {
    duduclaw_session::main()
}
