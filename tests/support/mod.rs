//! Helpers shared by the end-to-end tests: real S3 and DynamoDB servers, the local server,
//! and a browser.
#![allow(dead_code)]

pub mod cli;
pub mod lambda_service;
pub mod local_server;
pub mod runtime_api;
pub mod servers;
pub mod switch_proxy;
pub mod throttle_proxy;
pub mod webdriver;
