//! Both clients against the local protocol server, scoring with the stand-in
//! cross-encoder: the order they return is the cross-encoder's, and every way a service can
//! fail (slow, an error status, throttled, an answer outside the protocol, nobody
//! listening) is an error the engine turns into the fused order, within the timeout.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use sextant_core::encode::CrossEncoder;
use sextant_core::pipeline::{Candidate, CrossEncoderReranker, Reranked, Reranker};

use super::*;
use crate::protocol_server::{Fault, ProtocolServer};

const QUERY: &str = "How much stock did Apple buy back?";
const PASSAGES: [&str; 4] = [
    "It rained in Cupertino all week.",
    "Apple repurchased $90 billion of its common stock in fiscal 2023.",
    "The company paid dividends of $15 billion.",
    "Share repurchases and dividends returned capital to shareholders.",
];

fn standin() -> Arc<CrossEncoderReranker> {
    static MODEL: OnceLock<Arc<CrossEncoderReranker>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = sextant_core::testutil::model_dir().join("ce-standin");
            Arc::new(CrossEncoderReranker::new(
                CrossEncoder::load(&dir).expect("the stand-in cross-encoder"),
                "ce-standin",
            ))
        })
        .clone()
}

fn candidates() -> Vec<Candidate<'static>> {
    PASSAGES.iter().enumerate().map(|(i, t)| Candidate { chunk: 100 + i as u32, text: t, fused_score: 0.0 }).collect()
}

/// What the stand-in says directly: the order both hosted clients must return.
fn expected() -> Vec<Reranked> {
    standin().rerank(QUERY, &candidates()).unwrap()
}

struct Setup {
    rt: tokio::runtime::Runtime,
    server: ProtocolServer,
}

fn setup(api_key: Option<&str>) -> Setup {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let scorer: Arc<dyn Reranker> = standin();
    let server = rt
        .block_on(ProtocolServer::start("127.0.0.1:0".parse().unwrap(), scorer, api_key.map(str::to_string)))
        .unwrap();
    Setup { rt, server }
}

fn cohere(s: &Setup, key: Option<&str>, timeout: Duration) -> CohereReranker {
    CohereReranker::new(&s.server.url(), "rerank-v3.5", key.map(str::to_string), timeout, s.rt.handle().clone())
        .unwrap()
}

fn bedrock(s: &Setup, timeout: Duration) -> BedrockReranker {
    let sdk = aws_config::SdkConfig::builder()
        .region(aws_config::Region::new("us-west-2"))
        .credentials_provider(aws_sdk_bedrockagentruntime::config::SharedCredentialsProvider::new(
            aws_sdk_bedrockagentruntime::config::Credentials::new("AKIDSTANDIN", "secret", None, None, "test"),
        ))
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    BedrockReranker::new(&sdk, "amazon.rerank-v1:0", Some(&s.server.url()), timeout, s.rt.handle().clone()).unwrap()
}

fn assert_same_order(got: &[Reranked], want: &[Reranked]) {
    let chunks = |v: &[Reranked]| v.iter().map(|r| r.chunk).collect::<Vec<_>>();
    assert_eq!(chunks(got), chunks(want));
    for (g, w) in got.iter().zip(want) {
        assert!((g.score - w.score).abs() < 1e-6, "{g:?} vs {w:?}");
    }
}

#[test]
fn cohere_returns_the_services_order_and_sends_the_model_and_key() {
    let s = setup(Some("co-key"));
    let got = cohere(&s, Some("co-key"), Duration::from_secs(10)).rerank(QUERY, &candidates()).unwrap();
    assert_same_order(&got, &expected());
    assert_eq!(s.server.last_model().as_deref(), Some("rerank-v3.5"));
    // A wrong key is the service's 401, said as such.
    let e = cohere(&s, Some("wrong"), Duration::from_secs(10)).rerank(QUERY, &candidates()).unwrap_err().to_string();
    assert!(e.contains("answered 401") && e.contains("invalid api token"), "{e}");
}

#[test]
fn bedrock_returns_the_services_order_with_the_models_arn() {
    let s = setup(None);
    let got = bedrock(&s, Duration::from_secs(10)).rerank(QUERY, &candidates()).unwrap();
    assert_same_order(&got, &expected());
    assert_eq!(
        s.server.last_model().as_deref(),
        Some("arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0")
    );
}

#[test]
fn every_failure_is_an_error_within_the_timeout() {
    let s = setup(None);
    let timeout = Duration::from_millis(400);
    let clients: [(&str, Box<dyn Reranker>); 2] =
        [("Cohere", Box::new(cohere(&s, None, timeout))), ("Bedrock", Box::new(bedrock(&s, timeout)))];
    for (fault, why) in [
        (Fault::Slow(Duration::from_secs(3)), "did not answer within 400 ms"),
        (Fault::Status(500), "500"),
        (Fault::Status(429), "429"),
        (Fault::Garbage, "outside its protocol"),
        (Fault::UnknownIndex, "not one of the 4 documents"),
    ] {
        s.server.set_fault(fault);
        for (name, client) in &clients {
            let t = Instant::now();
            let e = client.rerank(QUERY, &candidates()).unwrap_err().to_string();
            let took = t.elapsed();
            let why = match (name, fault) {
                (&"Bedrock", Fault::Status(500)) => "InternalServerException",
                (&"Bedrock", Fault::Status(429)) => "ThrottlingException",
                _ => why,
            };
            assert!(e.contains(why) && e.contains(name), "{name} {fault:?}: {e}");
            assert!(took < Duration::from_millis(1500), "{name} {fault:?} took {took:?}");
        }
    }
    // And back to health: the same clients rerank again.
    s.server.set_fault(Fault::None);
    for (_, client) in &clients {
        assert_same_order(&client.rerank(QUERY, &candidates()).unwrap(), &expected());
    }
}

#[test]
fn nobody_listening_is_an_error_not_a_hang() {
    let s = setup(None);
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let c = CohereReranker::new(
        &format!("http://127.0.0.1:{port}"),
        "m",
        None,
        Duration::from_secs(5),
        s.rt.handle().clone(),
    )
    .unwrap();
    let t = Instant::now();
    let e = c.rerank(QUERY, &candidates()).unwrap_err().to_string();
    assert!(e.contains("Cohere Rerank") && t.elapsed() < Duration::from_secs(4), "{e}");
}

#[test]
fn settings_are_checked_when_read() {
    assert_eq!(Service::parse("f", "Cohere").unwrap(), Some(Service::Cohere));
    assert_eq!(Service::parse("f", "none").unwrap(), None);
    let e = Service::parse("--rerank-service", "openai").unwrap_err().to_string();
    assert!(e.contains("--rerank-service") && e.contains("\"cohere\", \"bedrock\""), "{e}");
    assert!(timeout_from_ms("t", "0").is_err() && timeout_from_ms("t", "abc").is_err());
    assert_eq!(timeout_from_ms("t", "750").unwrap(), Duration::from_millis(750));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let no_key =
        HostedConfig { service: Service::Cohere, model: None, endpoint: None, timeout: DEFAULT_TIMEOUT, api_key: None };
    let e = rt.block_on(no_key.connect()).err().unwrap().to_string();
    assert!(e.contains("CO_API_KEY"), "{e}");
    let bad = HostedConfig { endpoint: Some("ftp://x".into()), api_key: Some("k".into()), ..no_key.clone() };
    assert!(rt.block_on(bad.connect()).err().unwrap().to_string().contains("not an http(s) URL"));
    assert!(!format!("{:?}", HostedConfig { api_key: Some("secret".into()), ..no_key }).contains("secret"));
}

#[test]
fn the_protocol_server_refuses_what_the_services_refuse() {
    let s = setup(None);
    let url = s.server.url();
    let post = |path: &str, body: &str, auth: Option<&str>| {
        let (url, body, auth) = (format!("{url}{path}"), body.to_string(), auth.map(str::to_string));
        s.rt.block_on(async move {
            let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Full<hyper::body::Bytes>>();
            let mut req = hyper::Request::post(url.as_str()).header("content-type", "application/json");
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            let res = client.request(req.body(body.into()).unwrap()).await.unwrap();
            let kind = res.headers().get("x-amzn-errortype").map(|v| v.to_str().unwrap().to_string());
            (res.status().as_u16(), kind)
        })
    };
    assert_eq!(post("/v2/rerank", r#"{"model":"m","query":"q"}"#, None).0, 400);
    assert_eq!(post("/v2/rerank", r#"{"model":"m","query":"q","documents":[1]}"#, None).0, 400);
    assert_eq!(post("/v2/rerank", r#"{"model":"m","query":"q","documents":["a"],"top_n":0}"#, None).0, 400);
    assert_eq!(post("/rerank", "{}", None), (403, Some("AccessDeniedException".into())));
    let signed = Some("AWS4-HMAC-SHA256 Credential=AKID/20261124/us-west-2/bedrock/aws4_request, Signature=x");
    assert_eq!(post("/rerank", r#"{"queries":[]}"#, signed), (400, Some("ValidationException".into())));
}
