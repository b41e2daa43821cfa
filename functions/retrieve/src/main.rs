//! Lambda function `retrieve`: a placeholder that compiles until the API and AWS issues wire it.

fn main() {
    eprintln!("sextant-retrieve: not yet deployable; use `sextant` (cli) locally. Engine version {}", sextant::VERSION);
    std::process::exit(2);
}
