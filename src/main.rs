//! The `tephra` binary: parse the command line, set up logging, hand over to the library.
//! Errors end the process with one line on standard error and a non-zero exit code.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = match tephra::cli::Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version are "errors" to clap; print them whole.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            // One line, not clap's multi-line usage block: the first line names the problem.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("tephra: error: {first} (see 'tephra --help')");
            return std::process::ExitCode::from(2);
        }
    };
    if let Err(e) = tephra::app::init_logging(cli.log_format, cli.log.as_deref()) {
        eprintln!("tephra: error: {e}");
        return std::process::ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tephra: error: starting the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(tephra::app::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let line = anyhow::Error::from(e);
            eprintln!("tephra: error: {}", format!("{line:#}").replace('\n', " "));
            std::process::ExitCode::FAILURE
        }
    }
}
