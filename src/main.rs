use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = upcommit::cli::Cli::parse();
    let code = upcommit::cli::run(cli).await;
    // After the graceful stop: the spans of the last requests are still buffered.
    upcommit::telemetry::shutdown().await;
    std::process::exit(code);
}
