//! Helpers shared by the end-to-end tests against real S3 and DynamoDB servers.
#![allow(dead_code)]

pub mod runtime_api;
pub mod servers;
pub mod switch_proxy;
pub mod throttle_proxy;
