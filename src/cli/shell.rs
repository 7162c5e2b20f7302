//! `loadmix completions` and `loadmix man`: generated from clap's definitions, written to
//! memory first (clap_complete panics on a closed pipe).

use super::{Cli, Exit};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(super) struct ManArgs {
    /// Write loadmix.1 and loadmix-COMMAND.1 here instead of loadmix.1 on stdout.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Completions from the command definitions themselves, so they cannot drift from them.
pub(super) fn completions(a: CompletionsArgs) -> Exit {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics on a failed write, a closed pipe included.
    let mut text = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "loadmix", &mut text);
    to_stdout(&text)
}

/// Bytes on stdout; a reader that closed the pipe early (`| head`) is not an error.
pub(super) fn to_stdout(bytes: &[u8]) -> Exit {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => Exit::Write.fail(format!("stdout: {e}")),
    }
}

/// The man pages, from the same definitions as `--help`.
pub(super) fn man(a: ManArgs) -> Exit {
    use clap::CommandFactory;
    let cmd = Cli::command();
    match &a.out {
        Some(dir) => {
            match std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cmd, dir)) {
                Ok(()) => Exit::Ok,
                Err(e) => Exit::Write.fail(format!("man pages into {}: {e}", dir.display())),
            }
        }
        None => {
            let mut page = Vec::new();
            // Writing into memory cannot fail.
            let _ = clap_mangen::Man::new(cmd).render(&mut page);
            to_stdout(&page)
        }
    }
}
