use clap::Parser;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RANKD_LOG")
                .unwrap_or_else(|_| "warn,rankd=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = rankd::cli::Cli::parse();
    std::process::exit(rankd::cli::run(cli));
}
