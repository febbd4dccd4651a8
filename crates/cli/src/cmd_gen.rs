//! `flowpath gen`. (Being written.)

/// Arguments of `flowpath gen`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `flowpath gen`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("flowpath gen is not implemented yet")
}
