//! `flowpath ctl`: sends one command to a running switch's control
//! socket and prints the answer, as `ovs-appctl -t SOCKET` does (the
//! answer on stdout; an error on stderr with exit status 2).

use anyhow::Result;
use flowpath_unixctl::Client;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `flowpath ctl`.
#[derive(clap::Args)]
#[command(
    after_help = "Commands (list-commands prints them with their arguments):\n  \
dpif-netdev/pmd-stats-show, dpif-netdev/pmd-stats-clear, dpif-netdev/pmd-rxq-show,\n  \
dpctl/show, dpctl/dump-flows, dpctl/del-flows, ofproto/trace FLOW,\n  \
add-flow RULE, add-flows FILE, del-flows [MATCH], replace-flows FILE, dump-flows,\n  \
config/set KEY=VALUE, config/show, upcall/show, upcall/set-flow-limit N,\n  \
upcall/disable-megaflows, upcall/enable-megaflows, revalidator/purge,\n  \
revalidator/wait, memory/show, version, exit.\n\
Commands that print a table take --json."
)]
pub struct Args {
    /// Control socket (default: $FLOWPATH_RUNDIR/flowpath.ctl).
    #[arg(long, short = 't', value_name = "PATH")]
    ctl: Option<PathBuf>,
    /// Seconds to wait for the answer.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    timeout: u64,
    /// The command and its arguments.
    #[arg(
        value_name = "COMMAND",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<String>,
}

/// Runs `flowpath ctl`; returns the process exit status.
pub fn run(args: Args) -> Result<i32> {
    let path = args
        .ctl
        .clone()
        .unwrap_or_else(crate::cmd_switch::default_ctl);
    let mut c = Client::connect(&path, Duration::from_secs(args.timeout))?;
    let Some((method, params)) = args.command.split_first() else {
        anyhow::bail!("give a command (list-commands lists them)");
    };
    match c.call(method, params)? {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(0)
        }
        Err(e) => {
            eprint!("{e}");
            if !e.ends_with('\n') {
                eprintln!();
            }
            eprintln!("flowpath ctl: {}: server returned an error", path.display());
            Ok(2)
        }
    }
}
