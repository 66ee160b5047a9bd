use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = upcommit::cli::Cli::parse();
    std::process::exit(upcommit::cli::run(cli).await);
}
