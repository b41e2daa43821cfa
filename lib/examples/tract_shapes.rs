//! Compares tract plans with symbolic vs concrete input shapes.
use std::time::Instant;
use tract_onnx::prelude::*;

fn main() -> TractResult<()> {
    let path = sextant::encode::default_model_dir().join("minilm-l6-v2/model.onnx");
    let (b, s) = (1usize, 194usize);
    let input = |v: i64| -> TValue { Tensor::from_shape(&[b, s], &vec![v; b * s]).unwrap().into() };
    let opt = tract_onnx::onnx().model_for_path(&path)?.into_optimized()?;
    let mut ops = std::collections::BTreeMap::new();
    for n in opt.nodes() { *ops.entry(format!("{}", n.op.name())).or_insert(0) += 1; }
    println!("{ops:?}");
    for n in opt.nodes().iter().filter(|n| n.op.name().contains("Mat") || n.op.name().contains("Ein")).take(6) { println!("{} {:?}", n.name, n.op); }
    let sym = opt.into_runnable()?;
    let t = Instant::now();
    for _ in 0..5 { sym.run(tvec![input(1000), input(1), input(0)])?; }
    println!("symbolic: {:?}/run", t.elapsed() / 5);
    let t0 = Instant::now();
    let conc = tract_onnx::onnx()
        .model_for_path(&path)?
        .with_input_fact(0, InferenceFact::dt_shape(i64::datum_type(), tvec![b, s]))?
        .with_input_fact(1, InferenceFact::dt_shape(i64::datum_type(), tvec![b, s]))?
        .with_input_fact(2, InferenceFact::dt_shape(i64::datum_type(), tvec![b, s]))?
        .into_optimized()?
        .into_runnable()?;
    println!("concrete plan built in {:?}", t0.elapsed());
    let t = Instant::now();
    for _ in 0..5 { conc.run(tvec![input(1000), input(1), input(0)])?; }
    println!("concrete: {:?}/run", t.elapsed() / 5);
    Ok(())
}
