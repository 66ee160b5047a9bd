use clap::Parser;

fn main() {
    // A render worker (issue 46) starts no runtime and reads no settings: it is a process of
    // one thread until a decoder starts its own, under the limits it sets first.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).and_then(|a| a.to_str()) == Some(upcommit::jail::worker::SUBCOMMAND) {
        std::process::exit(upcommit::jail::worker::main(&args[2..]));
    }
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
