//! One module per endpoint: its request and response types (the wire shapes, with their
//! JSON Schemas) and its handler.

pub(crate) mod batch;
pub(crate) mod context;
pub(crate) mod documents;
pub mod indexes;
pub(crate) mod knowledge_base;
pub(crate) mod retrieve;
pub(crate) mod search;
