use clap::Parser;

fn main() {
    // libjpeg-turbo's TurboJPEG 2 API optimises a rendition's Huffman tables (smaller files, as
    // sharp writes them) only when this is set, and reads it on each encode: set here, before
    // the runtime starts any thread, since setting the environment races with other threads'
    // reads of it. An operator's own value stays.
    if std::env::var_os("TJ_OPTIMIZE").is_none() {
        std::env::set_var("TJ_OPTIMIZE", "1");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("upcommit: cannot start the async runtime: {e}");
            std::process::exit(70);
        }
    };
    let code = runtime.block_on(async {
        let cli = upcommit::cli::Cli::parse();
        let code = upcommit::cli::run(cli).await;
        // After the graceful stop: the spans of the last requests are still buffered.
        upcommit::telemetry::shutdown().await;
        code
    });
    std::process::exit(code);
}
