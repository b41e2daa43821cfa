//! Measures encoder throughput: `cargo run --release -p sextant --example encode_speed`.
use std::time::Instant;

use sextant::encode::{default_model_dir, DenseEncoder, SparseEncoder};

fn main() -> sextant::Result<()> {
    let dir = default_model_dir();
    let t = Instant::now();
    let dense = DenseEncoder::load(&dir.join("minilm-l6-v2"))?;
    println!("dense load {:?}", t.elapsed());
    let t = Instant::now();
    let sparse = SparseEncoder::load(&dir.join("splade-tiny"))?;
    println!("sparse load {:?}", t.elapsed());
    let text = "The quick brown fox jumps over the lazy dog and reports record quarterly revenue growth. ".repeat(12);
    let texts: Vec<&str> = (0..32).map(|_| text.as_str()).collect();
    let q = "What did management say about data center capex?";
    for _ in 0..2 {
        let t = Instant::now();
        for _ in 0..20 { dense.embed(q)?; }
        println!("dense query {:?}", t.elapsed() / 20);
        let t = Instant::now();
        for _ in 0..20 { sparse.encode(q)?; }
        println!("sparse query {:?}", t.elapsed() / 20);
    }
    let t = Instant::now();
    dense.embed_batch(&texts)?;
    println!("dense 32 docs of {} tokens: {:?}", dense.tokenizer().encode(&text)?.ids.len(), t.elapsed());
    let t = Instant::now();
    sparse.encode_batch(&texts)?;
    println!("sparse 32 docs: {:?}", t.elapsed());
    Ok(())
}
