//! The `loadmix` binary: parse the command line, run, exit with the code DESIGN §2 gives.

fn main() {
    std::process::exit(loadmix::cli::main(std::env::args_os()));
}
