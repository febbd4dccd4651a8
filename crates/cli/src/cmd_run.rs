//! `flowpath run`. (Being written.)

/// Arguments of `flowpath run`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `flowpath run`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("flowpath run is not implemented yet")
}
