//! Objects in S3 (or an S3-compatible server): whole and parallel ranged reads,
//! conditional writes, parallel multipart uploads, listing and deletion.

use std::sync::Arc;

use aws_sdk_s3::config::{RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::operation::upload_part::UploadPartError;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use sextant_core::error::{Error, Result};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::sdk::{endpoint_overridden, storage_error};

/// Ranged reads and multipart parts are this large.
pub const PART_BYTES: u64 = 8 << 20;
/// Objects larger than this are uploaded in parts.
pub const MULTIPART_ABOVE: u64 = 16 << 20;
/// The largest object one `CopyObject` request copies (5 GiB).
pub const COPY_MAX_BYTES: u64 = 5 << 30;
/// Requests in flight at once for one transfer.
const CONCURRENCY: usize = 16;

/// A bucket, through one S3 client.
///
/// Checksums: every index file carries its SHA-256 in the manifest and is verified after
/// download, so the SDK's own CRC checksums are asked for only where S3 requires them
/// (`RequestChecksumCalculation::WhenRequired`): uploads go as plain `Content-Length`
/// bodies rather than `aws-chunked` streams with checksum trailers, which saves hashing
/// every byte twice and works with S3-compatible servers that do not speak `aws-chunked`
/// (SeaweedFS 4.48 and moto 5.2 both accept either; the tests run against both).
#[derive(Clone)]
pub struct S3Store {
    client: Client,
    bucket: String,
}

/// An object's bytes and its ETag.
#[derive(Debug, Clone)]
pub struct Object {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The ETag, quoted as S3 returns it.
    pub etag: Option<String>,
    /// When it was last written, seconds since the Unix epoch (when the server says).
    pub modified_unix: Option<i64>,
}

/// An object as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its key.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written, seconds since the Unix epoch (when the server says).
    pub modified_unix: Option<i64>,
}

/// The precondition of a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// Write whatever is there.
    None,
    /// Only if the object does not exist (`If-None-Match: *`).
    Absent,
    /// Only if the object's ETag is this one (`If-Match`).
    ETag(String),
}

impl S3Store {
    /// A store over `bucket` with `config` (path-style when an endpoint is overridden).
    pub fn new(config: &aws_config::SdkConfig, bucket: impl Into<String>) -> Self {
        let conf = aws_sdk_s3::config::Builder::from(config)
            .force_path_style(config.endpoint_url().is_some() || endpoint_overridden("S3"))
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .build();
        S3Store { client: Client::from_conf(conf), bucket: bucket.into() }
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    fn uri(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }

    /// Reads a whole object; `Ok(None)` when it does not exist.
    pub async fn get(&self, key: &str) -> Result<Option<Object>> {
        match self.client.get_object().bucket(&self.bucket).key(key).send().await {
            Ok(out) => {
                let etag = out.e_tag().map(str::to_string);
                let modified_unix = out.last_modified().map(|t| t.secs());
                let bytes =
                    out.body.collect().await.map_err(|e| storage_error(self.uri(key), e))?.into_bytes().to_vec();
                Ok(Some(Object { bytes, etag, modified_unix }))
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(storage_error(self.uri(key), e)),
        }
    }

    /// Reads `len` bytes of `key` with up to 16 ranged GETs of 8 MiB in flight, straight
    /// into one buffer; refuses an object of another size.
    pub async fn get_ranged(&self, key: &str, len: u64) -> Result<Vec<u8>> {
        if len <= PART_BYTES {
            let obj = self
                .get(key)
                .await?
                .ok_or_else(|| Error::Storage { location: self.uri(key), reason: "no such object".into() })?;
            return Ok(obj.bytes);
        }
        let mut buf = vec![0u8; len as usize];
        self.get_parts(key, len, |start, bytes| {
            buf[start as usize..start as usize + bytes.len()].copy_from_slice(bytes);
            Ok(())
        })
        .await?;
        Ok(buf)
    }

    /// [`S3Store::get_ranged`] into `file` instead of memory: each part is written at its
    /// offset as it arrives, so at most 16 parts (128 MiB) are in memory at once.
    pub async fn get_ranged_to_file(&self, key: &str, len: u64, file: &std::fs::File) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let location = self.uri(key);
        file.set_len(len).map_err(|e| Error::Storage { location: location.clone(), reason: e.to_string() })?;
        self.get_parts(key, len, |start, bytes| {
            file.write_all_at(bytes, start).map_err(|e| Error::Storage {
                location: location.clone(),
                reason: format!("writing to local disk: {e}"),
            })
        })
        .await
    }

    /// Fetches `key`, `len` bytes, as ranged GETs of [`PART_BYTES`], at most
    /// `CONCURRENCY` in flight, handing each part to `sink` with its offset as it arrives;
    /// refuses a part of another size than asked.
    async fn get_parts(&self, key: &str, len: u64, mut sink: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
        let permits = Arc::new(Semaphore::new(CONCURRENCY));
        let mut tasks = JoinSet::new();
        for start in (0..len).step_by(PART_BYTES as usize) {
            let end = (start + PART_BYTES).min(len) - 1;
            let (client, bucket, key, permits) =
                (self.client.clone(), self.bucket.clone(), key.to_string(), permits.clone());
            tasks.spawn(async move {
                let _permit = permits.acquire_owned().await.expect("semaphore open");
                let out =
                    client.get_object().bucket(&bucket).key(&key).range(format!("bytes={start}-{end}")).send().await?;
                let bytes = out.body.collect().await.map_err(SdkError::<GetObjectError>::construction_failure)?;
                Ok::<_, SdkError<GetObjectError>>((start, bytes.into_bytes()))
            });
        }
        while let Some(joined) = tasks.join_next().await {
            let (start, bytes) = joined
                .map_err(|e| Error::task_failed(format!("transfer of {}", self.uri(key)), e))?
                .map_err(|e| storage_error(self.uri(key), e))?;
            let want = ((start + PART_BYTES).min(len) - start) as usize;
            if bytes.len() != want {
                return Err(Error::Storage {
                    location: self.uri(key),
                    reason: format!("range at {start}: expected {want} bytes, got {}", bytes.len()),
                });
            }
            sink(start, &bytes)?;
        }
        Ok(())
    }

    /// Writes an object if `pre` holds; returns its new ETag. A failed precondition is
    /// [`Error::Conflict`].
    pub async fn put(&self, key: &str, bytes: Vec<u8>, pre: &Precondition) -> Result<Option<String>> {
        let mut req = self.client.put_object().bucket(&self.bucket).key(key).body(ByteStream::from(bytes));
        req = match pre {
            Precondition::None => req,
            Precondition::Absent => req.if_none_match("*"),
            Precondition::ETag(t) => req.if_match(t),
        };
        match req.send().await {
            Ok(out) => Ok(out.e_tag().map(str::to_string)),
            Err(e) if matches!(e.raw_response().map(|r| r.status().as_u16()), Some(412) | Some(409)) => {
                Err(Error::Conflict {
                    location: self.uri(key),
                    reason: match pre {
                        Precondition::Absent => "the object was created by someone else meanwhile".into(),
                        _ => "the object was changed by someone else meanwhile".into(),
                    },
                })
            }
            Err(e) => Err(storage_error(self.uri(key), e)),
        }
    }

    /// Uploads an object: in one request up to 16 MiB, above that as a multipart upload
    /// of 8 MiB parts, 16 at a time (aborted if any part fails).
    pub async fn upload(&self, key: &str, bytes: Arc<Vec<u8>>) -> Result<()> {
        if (bytes.len() as u64) <= MULTIPART_ABOVE {
            self.put(key, bytes.as_ref().clone(), &Precondition::None).await?;
            return Ok(());
        }
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| storage_error(self.uri(key), e))?;
        let upload_id = created
            .upload_id()
            .ok_or_else(|| Error::Storage { location: self.uri(key), reason: "no upload id returned".into() })?
            .to_string();
        let result = self.upload_parts(key, &upload_id, bytes).await;
        match result {
            Ok(parts) => {
                let done = CompletedMultipartUpload::builder().set_parts(Some(parts)).build();
                self.client
                    .complete_multipart_upload()
                    .bucket(&self.bucket)
                    .key(key)
                    .upload_id(&upload_id)
                    .multipart_upload(done)
                    .send()
                    .await
                    .map_err(|e| storage_error(self.uri(key), e))?;
                Ok(())
            }
            Err(e) => {
                let _ = self
                    .client
                    .abort_multipart_upload()
                    .bucket(&self.bucket)
                    .key(key)
                    .upload_id(&upload_id)
                    .send()
                    .await;
                Err(e)
            }
        }
    }

    async fn upload_parts(&self, key: &str, upload_id: &str, bytes: Arc<Vec<u8>>) -> Result<Vec<CompletedPart>> {
        let permits = Arc::new(Semaphore::new(CONCURRENCY));
        let mut tasks = JoinSet::new();
        let len = bytes.len() as u64;
        for (i, start) in (0..len).step_by(PART_BYTES as usize).enumerate() {
            let end = (start + PART_BYTES).min(len);
            let number = i as i32 + 1;
            let (client, bucket, key, upload_id, bytes, permits) = (
                self.client.clone(),
                self.bucket.clone(),
                key.to_string(),
                upload_id.to_string(),
                bytes.clone(),
                permits.clone(),
            );
            tasks.spawn(async move {
                let _permit = permits.acquire_owned().await.expect("semaphore open");
                let body = ByteStream::from(bytes[start as usize..end as usize].to_vec());
                let out = client
                    .upload_part()
                    .bucket(bucket)
                    .key(key)
                    .upload_id(upload_id)
                    .part_number(number)
                    .body(body)
                    .send()
                    .await?;
                Ok::<_, SdkError<UploadPartError>>(
                    CompletedPart::builder().part_number(number).set_e_tag(out.e_tag().map(str::to_string)).build(),
                )
            });
        }
        let mut parts = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let part = joined
                .map_err(|e| Error::task_failed(format!("transfer of {}", self.uri(key)), e))?
                .map_err(|e| storage_error(self.uri(key), e))?;
            parts.push(part);
        }
        parts.sort_by_key(|p| p.part_number());
        Ok(parts)
    }

    /// Copies `from` to `to` inside the bucket, server-side (S3's `CopyObject`: no byte
    /// passes through this process). One request copies at most 5 GiB, S3's limit for it;
    /// a larger object is refused with the reason. Keys are expected as this crate writes
    /// them (letters, digits, `/`, `.`, `-` and `_`: nothing to escape in the copy source).
    pub async fn copy(&self, from: &str, to: &str, size: u64) -> Result<()> {
        if size > COPY_MAX_BYTES {
            return Err(Error::Storage {
                location: self.uri(from),
                reason: format!("{size} bytes: one copy request takes at most {COPY_MAX_BYTES}"),
            });
        }
        self.client
            .copy_object()
            .bucket(&self.bucket)
            .copy_source(format!("{}/{from}", self.bucket))
            .key(to)
            .send()
            .await
            .map_err(|e| storage_error(format!("{} (copied to {to})", self.uri(from)), e))?;
        Ok(())
    }

    /// Every key under `prefix` with its size.
    pub async fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token)
                .send()
                .await
                .map_err(|e| storage_error(self.uri(prefix), e))?;
            out.extend(
                page.contents()
                    .iter()
                    .filter_map(|o| Some((o.key()?.to_string(), o.size().unwrap_or(0).max(0) as u64))),
            );
            token = page.next_continuation_token().map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Up to `max` objects under `prefix` whose keys sort after `start_after`, in key
    /// order, and whether more follow.
    pub async fn list_after(&self, prefix: &str, start_after: Option<&str>, max: usize) -> Result<(Vec<Listed>, bool)> {
        let page = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .set_start_after(start_after.map(str::to_string))
            .max_keys(max.clamp(1, 1000) as i32)
            .send()
            .await
            .map_err(|e| storage_error(self.uri(prefix), e))?;
        let listed = page
            .contents()
            .iter()
            .filter_map(|o| {
                Some(Listed {
                    key: o.key()?.to_string(),
                    size: o.size().unwrap_or(0).max(0) as u64,
                    modified_unix: o.last_modified().map(|t| t.secs()),
                })
            })
            .collect();
        Ok((listed, page.is_truncated().unwrap_or(false)))
    }

    /// Whether object `key` exists.
    pub async fn exists(&self, key: &str) -> Result<bool> {
        match self.client.head_object().bucket(&self.bucket).key(key).send().await {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(false),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => Ok(false),
            Err(e) => Err(storage_error(self.uri(key), e)),
        }
    }

    /// Deletes object `key` (nothing happens when there is none).
    pub async fn delete(&self, key: &str) -> Result<()> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| storage_error(self.uri(key), e))
    }

    /// Deletes every object under `prefix`, 16 at a time; returns how many.
    pub async fn delete_prefix(&self, prefix: &str) -> Result<usize> {
        let keys = self.list(prefix).await?;
        let permits = Arc::new(Semaphore::new(CONCURRENCY));
        let mut tasks = JoinSet::new();
        for (key, _) in &keys {
            let (client, bucket, key, permits) =
                (self.client.clone(), self.bucket.clone(), key.clone(), permits.clone());
            tasks.spawn(async move {
                let _permit = permits.acquire_owned().await.expect("semaphore open");
                client
                    .delete_object()
                    .bucket(bucket)
                    .key(&key)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| storage_error(key, e))
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.map_err(|e| Error::task_failed(format!("transfer of {}", self.uri(prefix)), e))??;
        }
        Ok(keys.len())
    }

    /// Copies every object under `prefix` into `dir` (keys relative to the prefix), the
    /// way models are brought to a function's `/tmp`; skips files already there with the
    /// same size. Returns the bytes downloaded.
    pub async fn download_prefix(&self, prefix: &str, dir: &std::path::Path) -> Result<u64> {
        let mut total = 0;
        let prefix = if prefix.is_empty() || prefix.ends_with('/') { prefix.to_string() } else { format!("{prefix}/") };
        let objects = self.list(&prefix).await?;
        if objects.is_empty() {
            return Err(Error::Storage { location: self.uri(&prefix), reason: "no objects under this prefix".into() });
        }
        let mut tasks = JoinSet::new();
        for (key, size) in objects {
            let rel = key.strip_prefix(&prefix).unwrap_or(&key).to_string();
            if rel.is_empty() || rel.ends_with('/') || rel.split('/').any(|p| p.is_empty() || p == "." || p == "..") {
                continue;
            }
            let path = dir.join(&rel);
            if std::fs::metadata(&path).is_ok_and(|m| m.len() == size) {
                continue;
            }
            let store = self.clone();
            tasks.spawn(async move {
                let bytes = store.get_ranged(&key, size).await?;
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
                }
                let tmp = path.with_extension("part");
                std::fs::write(&tmp, &bytes).map_err(|e| Error::io(&tmp, e))?;
                std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
                Ok::<u64, Error>(bytes.len() as u64)
            });
        }
        while let Some(joined) = tasks.join_next().await {
            total += joined.map_err(|e| Error::task_failed(format!("transfer of {}", self.uri(&prefix)), e))??;
        }
        Ok(total)
    }
}
