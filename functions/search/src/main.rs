//! Lambda function `search`: a placeholder that compiles until the API and AWS issues wire it.

fn main() {
    eprintln!("sextant-search: not yet deployable; use `sextant` (cli) locally. Engine version {}", sextant::VERSION);
    std::process::exit(2);
}
