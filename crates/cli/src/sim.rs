//! `stint sim`.

#[derive(clap::Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet implemented")
}
