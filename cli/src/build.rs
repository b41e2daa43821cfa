//! `sextant build`: plan, encode (here or in worker processes), merge, reusing the vectors
//! of the index already at `--out`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use sextant_core::build::{
    build_shards, encode_task, BuildOptions, BuildReport, EncodeRunner, EncodeTask, EncodedShard, InProcess, Previous,
    Progress,
};
use sextant_core::encode::{DenseEncoder, ModelSet, SparseEncoder, TextTokenizer};
use sextant_core::error::Error as CoreError;
use sextant_core::storage::{LocalDir, Storage};

/// Times a failed encode task is tried again before the build fails.
pub const RETRIES: usize = 2;

/// Set to a file path, makes the first encode worker that finds no file there create it
/// and fail: how the tests prove that a failed task is retried.
pub const FAIL_ONCE_ENV: &str = "SEXTANT_FAIL_ONCE";

/// Runs encode tasks in `workers` child processes (`sextant encode-worker`), each with its
/// share of the cores. A task whose process fails is run again up to [`RETRIES`] times.
pub struct Processes {
    /// Processes at once.
    pub workers: usize,
    /// The model directory the workers load.
    pub models: PathBuf,
    /// Where tasks and shards are exchanged.
    pub work_dir: PathBuf,
}

impl Processes {
    fn run_one(&self, task: &EncodeTask) -> std::result::Result<EncodedShard, String> {
        let task_file = self.work_dir.join(format!("task-{:05}.bin", task.shard));
        let out = self.work_dir.join(format!("shard-{:05}.bin", task.shard));
        std::fs::write(&task_file, bincode::serialize(task).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        let threads = (std::thread::available_parallelism().map_or(1, |n| n.get()) / self.workers).max(1);
        let mut last = String::new();
        for attempt in 0..=RETRIES {
            let _ = std::fs::remove_file(&out);
            let result = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
                .arg("--models")
                .arg(&self.models)
                .arg("encode-worker")
                .arg("--task")
                .arg(&task_file)
                .arg("--out")
                .arg(&out)
                .env("RAYON_NUM_THREADS", threads.to_string())
                .output();
            match result {
                Ok(o) if o.status.success() => {
                    let shard = std::fs::read(&out)
                        .map_err(|e| e.to_string())
                        .and_then(|b| {
                            EncodedShard::from_bytes(&out.display().to_string(), &b).map_err(|e| e.to_string())
                        })
                        .and_then(|s| match s.holds(&task.keys) {
                            true => Ok(s),
                            false => Err("the shard holds other chunks than its task".into()),
                        });
                    match shard {
                        Ok(s) => return Ok(s),
                        Err(e) => last = e,
                    }
                }
                Ok(o) => last = format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim()),
                Err(e) => last = e.to_string(),
            }
            eprintln!("encode task {} failed (attempt {}): {last}", task.shard, attempt + 1);
        }
        Err(last)
    }
}

impl EncodeRunner for Processes {
    fn run(&self, tasks: Vec<EncodeTask>, progress: Progress) -> sextant_core::Result<Vec<EncodedShard>> {
        std::fs::create_dir_all(&self.work_dir).map_err(|e| CoreError::io(&self.work_dir, e))?;
        let total: usize = tasks.iter().map(|t| t.keys.len()).sum();
        let (next, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let results: Mutex<Vec<std::result::Result<EncodedShard, CoreError>>> = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..self.workers.min(tasks.len()) {
                scope.spawn(|| {
                    while let Some(task) = tasks.get(next.fetch_add(1, Ordering::SeqCst)) {
                        let result = self.run_one(task).map_err(|reason| CoreError::TaskFailed {
                            task: format!("encode task {} ({} chunks)", task.shard, task.keys.len()),
                            reason,
                        });
                        let n = done.fetch_add(task.keys.len(), Ordering::SeqCst) + task.keys.len();
                        progress("encode", n, total);
                        results.lock().expect("results lock").push(result);
                    }
                });
            }
        });
        let _ = std::fs::remove_dir_all(&self.work_dir);
        results.into_inner().expect("results lock").into_iter().collect()
    }

    fn workers(&self) -> usize {
        self.workers
    }
}

/// `sextant encode-worker`: encodes the task in `task` and writes the shard to `out`.
pub fn encode_worker(models: &ModelSet, task: &Path, out: &Path) -> Result<()> {
    if let Some(marker) = std::env::var_os(FAIL_ONCE_ENV) {
        if std::fs::OpenOptions::new().write(true).create_new(true).open(&marker).is_ok() {
            bail!("failing once on purpose ({FAIL_ONCE_ENV})");
        }
    }
    let task: EncodeTask = bincode::deserialize(&std::fs::read(task)?).context("reading the encode task")?;
    let (dense, sparse) = (DenseEncoder::load(&models.dense)?, SparseEncoder::load(&models.sparse)?);
    let shard = encode_task(&task, &dense, &sparse, &|_| {})?;
    let dir = out.parent().context("the shard's directory")?;
    let name = out.file_name().and_then(|n| n.to_str()).context("the shard's file name")?;
    LocalDir::new(dir).write(name, &shard.to_bytes()?)?;
    Ok(())
}

/// What `sextant build` is asked for.
pub struct BuildCommand<'a> {
    /// The documents, read already.
    pub documents: Vec<sextant_core::corpus::Document>,
    /// Files saved with the index (the facts).
    pub attachments: Vec<(String, Vec<u8>)>,
    /// Build options.
    pub options: BuildOptions,
    /// The index directory (its current index is the cache).
    pub out: &'a Path,
    /// Worker processes.
    pub workers: usize,
    /// Index shards (1: a single index).
    pub shards: usize,
    /// Seconds spent reading the documents.
    pub read_seconds: f64,
    /// Files of a folder that were not read, for the report.
    pub skipped_files: Vec<sextant_core::corpus::SkippedFile>,
}

/// What a build into `out` would do ([`sextant_core::build::dry_run`]).
pub fn dry_run(
    models: &ModelSet,
    documents: Vec<sextant_core::corpus::Document>,
    attachments: &[(String, Vec<u8>)],
    options: &BuildOptions,
    out: &Path,
) -> Result<BuildReport> {
    let previous = Previous::read(&LocalDir::new(out));
    let (dense, sparse) = (TextTokenizer::of_model(&models.dense)?, TextTokenizer::of_model(&models.sparse)?);
    Ok(sextant_core::build::dry_run(documents, attachments, options, (&dense, &sparse), &previous)?)
}

/// Runs a build into `cmd.out` and returns its report (also at `out/build_report.json`).
pub fn run(models: &ModelSet, cmd: BuildCommand) -> Result<BuildReport> {
    let storage = LocalDir::new(cmd.out);
    let previous = Previous::read(&storage);
    let tokenizers = (TextTokenizer::of_model(&models.dense)?, TextTokenizer::of_model(&models.sparse)?);
    let bar = crate::progress::ProgressDisplay::new();
    let progress = |stage: &str, done: usize, total: usize| bar.update(stage, done, total);
    let (processes, encoders, in_process);
    let runner: &dyn EncodeRunner = if cmd.workers > 1 {
        processes = Processes {
            workers: cmd.workers,
            models: models.dense.parent().map(Path::to_path_buf).unwrap_or_default(),
            work_dir: cmd.out.with_file_name(format!(
                ".{}.build-{}",
                cmd.out.file_name().and_then(|n| n.to_str()).unwrap_or("index"),
                std::process::id()
            )),
        };
        &processes
    } else {
        encoders = (DenseEncoder::load(&models.dense)?, SparseEncoder::load(&models.sparse)?);
        in_process = InProcess { dense: &encoders.0, sparse: &encoders.1 };
        &in_process
    };
    let tk = (&tokenizers.0, &tokenizers.1);
    if cmd.shards > 1 {
        let built = build_shards(cmd.documents, &cmd.options, tk, &previous, runner, cmd.shards, &progress)?;
        bar.finish();
        let mut built = built;
        built.report.phases.read = cmd.read_seconds;
        built.report.skipped_files = cmd.skipped_files;
        return Ok(built.save(&storage, &previous)?);
    }
    let mut built =
        sextant_core::build::build(cmd.documents, cmd.attachments, &cmd.options, tk, &previous, runner, &progress)?;
    bar.finish();
    built.report.phases.read = cmd.read_seconds;
    built.report.skipped_files = cmd.skipped_files;
    let report = built.save(&storage, &previous)?.report;
    if report.tokens_beyond_window > 0 {
        eprintln!("warning: {} tokens beyond the encoders' window (a title fills it)", report.tokens_beyond_window);
    }
    Ok(report)
}
