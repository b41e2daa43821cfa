//! # sextant-lambda
//!
//! What Sextant's Lambda functions share, so each `main.rs` stays a few lines: the
//! context built once at cold start from the environment ([`startup`]: indexes from
//! directories or S3, models, the key store), the warm refresh of S3 indexes, and the
//! `lambda_http` runners of the API functions and the index-build function ([`runner`]).

#![warn(missing_docs)]

pub mod runner;
pub mod startup;

pub use runner::{init_logging, refresh, serve, serve_index_build};
pub use startup::{from_env, key_store_from_env, models_from_env, Context};

#[cfg(test)]
mod tests {
    #[test]
    fn every_variable_template_yaml_sets_is_read_by_the_code() {
        let template = include_str!("../../../template.yaml");
        let code = [include_str!("startup.rs"), include_str!("../../aws/src/build_job.rs"), include_str!("../../aws/src/sdk.rs")].concat();
        let mut vars: Vec<&str> = template
            .match_indices("SEXTANT_")
            .map(|(i, _)| {
                let rest = &template[i..];
                &rest[..rest.find(|c: char| !(c.is_ascii_uppercase() || c == '_')).unwrap_or(rest.len())]
            })
            .collect();
        vars.sort();
        vars.dedup();
        assert!(vars.len() >= 8, "{vars:?}");
        for v in vars {
            assert!(code.contains(&format!("\"{v}\"")), "template.yaml sets {v}, which no code reads");
        }
    }
}
