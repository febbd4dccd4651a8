//! `flowpath trace`. (Being written.)

/// Arguments of `flowpath trace`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `flowpath trace`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("flowpath trace is not implemented yet")
}
