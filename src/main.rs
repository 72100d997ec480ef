//! The `tephra` binary: parse the command line, set up logging, hand over to the library.
//! Errors end the process with one line on standard error and a non-zero exit code.

use clap::Parser;
use clap::error::ErrorKind;

/// mimalloc for the service. Every answer tephra gives allocates many short-lived strings and
/// JSON values on two or three threads; a profile of the embedded system binding 4,000 gang
/// pods spent about a quarter of its CPU in glibc's malloc and free (consolidation and chunk
/// unlinking), which mimalloc's per-thread free lists avoid. The benches declare the same
/// allocator, so their figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = match tephra::cli::Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version are "errors" to clap; print them whole.
        Err(e) if !e.use_stderr() => e.exit(),
        // Bare `tephra` (or a subcommand that needs one): the usage is the answer, not an
        // error line made of the description.
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprint!("{e}");
            return std::process::ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("tephra: error: {}", tephra::cli::flag_error_line(&e));
            return std::process::ExitCode::from(2);
        }
    };
    let filter = cli.log.clone().or_else(|| {
        (cli.command.is_client() && std::env::var_os("RUST_LOG").is_none())
            .then(|| tephra::cli::CLIENT_LOG_FILTER.to_string())
    });
    if let Err(e) = tephra::app::init_logging(cli.log_format, filter.as_deref()) {
        eprintln!("tephra: error: {}", tephra::report::report(&e));
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
            // Outermost cause first, each cause once, on one line (see `tephra::report`).
            eprintln!("tephra: error: {}", tephra::report::report(&e));
            std::process::ExitCode::FAILURE
        }
    }
}
