//! The `loadmix` binary: parse the command line, run, exit with the code `cli::Exit`
//! gives (the README lists them).

fn main() {
    std::process::exit(loadmix::main(std::env::args_os()));
}
