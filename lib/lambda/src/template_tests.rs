//! `template.yaml` checked for what only AWS would otherwise show: the stage throttling, the
//! index builder's reserved concurrency, the alarms and the topic they notify, the resources
//! kept when the stack goes, the least-privilege conditions; and `infra/README.md`'s
//! environment and IAM tables checked against the template, both ways.
//!
//! No YAML parser is among the dependencies, so the template is read by its indentation
//! (two spaces a level, resources and their properties in block style), which is how it is
//! written throughout.

use std::collections::BTreeSet;

use sextant_server::access::{emf_line, AccessRecord};

const TEMPLATE: &str = include_str!("../../../template.yaml");
const README: &str = include_str!("../../../infra/README.md");

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The lines under the line `header` (its text, trimmed) at indentation `at`, up to the
/// next non-blank line indented `at` or less.
fn block<'a>(lines: &[&'a str], header: &str, at: usize) -> Vec<&'a str> {
    let start = lines
        .iter()
        .position(|l| indent(l) == at && l.trim() == header)
        .unwrap_or_else(|| panic!("template.yaml: no {header:?} at indentation {at}"));
    lines[start + 1..].iter().take_while(|l| l.trim().is_empty() || indent(l) > at).copied().collect()
}

/// Line `start` and the deeper lines that continue it, trimmed and joined by spaces,
/// without blank and comment lines.
fn joined(lines: &[&str], start: usize) -> String {
    let at = indent(lines[start]);
    let deeper = lines[start + 1..].iter().take_while(|l| l.trim().is_empty() || indent(l) > at);
    std::iter::once(&lines[start])
        .chain(deeper)
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The entry `key:` at indentation `at`, with what continues it (see [`joined`]).
fn entry(lines: &[&str], key: &str, at: usize) -> Option<String> {
    let wanted = format!("{key}:");
    let start = lines.iter().position(|l| indent(l) == at && l.trim().starts_with(&wanted))?;
    Some(joined(lines, start))
}

/// Whether `lines` hold `text` (trimmed) at indentation `at`.
fn has(lines: &[&str], at: usize, text: &str) -> bool {
    lines.iter().any(|l| indent(l) == at && l.trim() == text)
}

/// A top-level section (`Parameters:`, `Conditions:`, `Globals:`, `Resources:`).
fn top(name: &str) -> Vec<&'static str> {
    block(&TEMPLATE.lines().collect::<Vec<_>>(), name, 0)
}

/// The `Resources:` section with the resources each `Fn::ForEach` loop makes (written as a
/// third list item on lines of their own, at indentation 6) moved to indentation 2, their
/// logical ids keeping the loop's `${K}`: every resource as the helpers below read one.
fn resources_section() -> Vec<&'static str> {
    let lines = top("Resources:");
    let mut out = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        if indent(lines[i]) == 2 && lines[i].trim().starts_with("Fn::ForEach::") {
            let body: Vec<&str> =
                lines[i + 1..].iter().take_while(|l| l.trim().is_empty() || indent(l) > 2).copied().collect();
            let fragment = body.iter().position(|l| indent(l) == 4 && l.trim() == "-").expect("a fragment item");
            out.extend(body[fragment + 1..].iter().map(|l| l.get(4..).unwrap_or("")));
            i += 1 + body.len();
        } else {
            out.push(lines[i]);
            i += 1;
        }
    }
    out
}

/// A resource's lines (its attributes at indentation 4, its properties at 6).
fn resource(name: &str) -> Vec<&'static str> {
    block(&resources_section(), &format!("{name}:"), 2)
}

fn parameter(name: &str) -> Vec<&'static str> {
    block(&top("Parameters:"), &format!("{name}:"), 2)
}

/// The logical ids of the resources of type `ty`.
fn resources_of_type(ty: &str) -> Vec<&'static str> {
    let wanted = format!("Type: {ty}");
    resources_section()
        .into_iter()
        .filter(|l| indent(l) == 2 && !l.trim().starts_with('#'))
        .filter_map(|l| l.trim().strip_suffix(':'))
        .filter(|name| has(&resource(name), 4, &wanted))
        .collect()
}

/// The value of a resource's property `key` (with its continuation lines).
fn property(res: &str, key: &str) -> String {
    let props = block(&resource(res), "Properties:", 4);
    value(&props, key).unwrap_or_else(|| panic!("template.yaml: {res} has no {key}"))
}

/// The value of the property `key` among a resource's `props`.
fn value(props: &[&str], key: &str) -> Option<String> {
    entry(props, key, 6).map(|e| e[key.len() + 1..].trim().to_string())
}

/// A numeric parameter's default.
fn default_number(name: &str) -> f64 {
    let p = parameter(name);
    assert!(has(&p, 4, "Type: Number"), "parameter {name} is not a Number");
    let d = entry(&p, "Default", 4).unwrap_or_else(|| panic!("parameter {name} has no default"));
    d["Default:".len()..].trim().parse().unwrap_or_else(|e| panic!("parameter {name}: {d}: {e}"))
}

/// Every alarm: its logical id and its properties.
fn alarms() -> Vec<(&'static str, Vec<&'static str>)> {
    resources_of_type("AWS::CloudWatch::Alarm")
        .into_iter()
        .map(|a| (a, block(&resource(a), "Properties:", 4)))
        .collect()
}

/// The alarms on `metric` of `namespace`.
fn alarms_on(namespace: &str, metric: &str) -> Vec<(&'static str, Vec<&'static str>)> {
    alarms()
        .into_iter()
        .filter(|(_, p)| {
            value(p, "Namespace").as_deref() == Some(namespace) && value(p, "MetricName").as_deref() == Some(metric)
        })
        .collect()
}

/// The value of an alarm's dimension `name` (`- Name: name` then `Value: ...`).
fn dimension(props: &[&str], name: &str) -> Option<String> {
    let start = props.iter().position(|l| indent(l) == 6 && l.trim() == "Dimensions:")?;
    let wanted = format!("- Name: {name}");
    let dims = &props[start + 1..];
    let i = dims.iter().take_while(|l| indent(l) > 6).position(|l| l.trim() == wanted)?;
    dims.get(i + 1)?.trim().strip_prefix("Value:").map(|v| v.trim().to_string())
}

/// The IAM policy statement `sid` of resource `res`, joined (see [`joined`]).
fn statement(res: &str, sid: &str) -> String {
    let lines = resource(res);
    let wanted = format!("- Sid: {sid}");
    let start = lines
        .iter()
        .position(|l| l.trim() == wanted)
        .unwrap_or_else(|| panic!("template.yaml: {res} has no statement {sid}"));
    joined(&lines, start)
}

/// The `Sid`s of resource `res`'s policy statements.
fn sids(res: &str) -> Vec<&'static str> {
    resource(res).into_iter().filter_map(|l| l.trim().strip_prefix("- Sid: ")).collect()
}

/// Each function's logical id and its name in infra/README.md's tables: the binary it runs
/// without `sextant-` (`retrieve`, `search`, `index-build`).
fn functions() -> Vec<(&'static str, String)> {
    let functions: Vec<_> = resources_of_type("AWS::Serverless::Function")
        .into_iter()
        .map(|f| {
            let binary = resource(f)
                .into_iter()
                .find_map(|l| l.trim().strip_prefix("Binary: "))
                .unwrap_or_else(|| panic!("template.yaml: {f} names no Binary"));
            (f, binary.trim_start_matches("sextant-").to_string())
        })
        .collect();
    assert!(functions.len() >= 3, "{functions:?}");
    functions
}

/// The keys of the `Variables:` map in `lines` (none without one).
fn variables(lines: &[&str]) -> Vec<String> {
    let Some(at) = lines.iter().copied().find(|l| l.trim() == "Variables:").map(indent) else {
        return Vec::new();
    };
    block(lines, "Variables:", at)
        .into_iter()
        .filter(|l| indent(l) == at + 2 && !l.trim().starts_with('#'))
        .map(|l| l.trim().split_once(':').map_or(l.trim(), |(k, _)| k).to_string())
        .collect()
}

/// The IAM actions the `Policies:` of resource `res` grant (`Action: a`, `Action: [a, b]`
/// or a list under `Action:`).
fn actions(res: &str) -> BTreeSet<String> {
    let policies = block(&block(&resource(res), "Properties:", 4), "Policies:", 6);
    let mut out = BTreeSet::new();
    for (i, line) in policies.iter().enumerate() {
        let Some(rest) = line.trim().strip_prefix("Action:") else { continue };
        let rest = rest.trim();
        let listed: Vec<&str> = if rest.is_empty() {
            policies[i + 1..]
                .iter()
                .take_while(|l| indent(l) > indent(line))
                .filter_map(|l| l.trim().strip_prefix("- "))
                .collect()
        } else {
            rest.trim_start_matches('[').trim_end_matches(']').split(',').collect()
        };
        out.extend(listed.into_iter().map(|a| a.trim().trim_matches('\'').to_string()));
    }
    out
}

/// The rows of infra/README.md's table whose header row is `header`, as trimmed cells.
fn readme_table(header: &str) -> Vec<Vec<&'static str>> {
    let mut lines = README.lines().skip_while(|l| l.trim() != header);
    assert!(lines.next().is_some(), "infra/README.md has no table {header}");
    assert!(lines.next().is_some_and(|l| l.starts_with("|---")), "infra/README.md, table {header}: no separator row");
    let rows: Vec<Vec<&str>> = lines
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim().trim_start_matches('|').trim_end_matches('|').split('|').map(str::trim).collect())
        .collect();
    for row in &rows {
        assert_eq!(row.len(), 3, "infra/README.md, table {header}: {row:?}");
    }
    rows
}

/// The `code spans` of a Markdown table cell.
fn code_spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The functions a table cell names: `all` (every one in `all`), or names separated by `,`,
/// with a remark in parentheses after them.
fn named_functions(cell: &str, all: &[(&str, String)]) -> Vec<String> {
    let names = cell.split_once('(').map_or(cell, |(names, _)| names).trim();
    if names == "all" {
        return all.iter().map(|(_, n)| n.clone()).collect();
    }
    names.split(',').map(|n| n.trim().to_string()).collect()
}

#[test]
fn the_api_stage_is_throttled_by_parameters_with_defaults() {
    let api = resource("Api");
    assert!(has(&api, 4, "Type: AWS::Serverless::Api"), "the API is no longer a REST API: {api:#?}");
    let settings = block(&block(&api, "Properties:", 4), "MethodSettings:", 6);
    // One entry for every route and method: the stage's own limits.
    assert!(
        has(&settings, 8, "- ResourcePath: '/*'") && has(&settings, 10, "HttpMethod: '*'"),
        "the throttling must cover every route and method: {settings:#?}"
    );
    for (setting, param) in
        [("ThrottlingRateLimit", "ThrottleRateLimit"), ("ThrottlingBurstLimit", "ThrottleBurstLimit")]
    {
        assert!(has(&settings, 10, &format!("{setting}: !Ref {param}")), "{setting} is not the parameter {param}");
        assert!(default_number(param) >= 1.0, "{param} must default to a limit");
    }
    assert!(default_number("ThrottleBurstLimit") >= default_number("ThrottleRateLimit"));
}

#[test]
fn index_build_has_a_reserved_concurrency_from_a_parameter_with_a_default() {
    let reserved = property("IndexBuildFunction", "ReservedConcurrentExecutions");
    assert!(
        reserved.contains("HasIndexBuildReservedConcurrency")
            && reserved.contains("!Ref IndexBuildReservedConcurrency"),
        "{reserved}"
    );
    let condition = entry(&top("Conditions:"), "HasIndexBuildReservedConcurrency", 2).expect("the condition");
    assert!(condition.contains("!Not [!Equals [!Ref IndexBuildReservedConcurrency, 0]]"), "{condition}");
    // Reserved by default, with room for the workflow's encode invocations and one more.
    let default = default_number("IndexBuildReservedConcurrency");
    assert!(
        default > default_number("BuildConcurrency"),
        "IndexBuildReservedConcurrency ({default}) must exceed BuildConcurrency"
    );
}

/// The serving functions read a loaded index's `f32` vectors and SPLADE postings from
/// local disk, so their `/tmp` comes from a parameter, and its default holds two copies (a
/// swap) of those files for the largest index the default memory swaps: infra/README.md's
/// rule, `3.4 · 2,270` bytes a chunk plus 16 MiB within 3,008 − 384 MiB, is about
/// 354,000 chunks, whose files at 1.7 windows a chunk (2,610 + 1,476 bytes) are 2,761 MiB
/// twice.
/// Index-build keeps its own.
#[test]
fn the_serving_functions_have_local_disk_for_two_copies_of_the_vectors() {
    let globals = block(&top("Globals:"), "Function:", 2);
    let disk = block(&globals, "EphemeralStorage:", 4);
    assert!(has(&disk, 6, "Size: !Ref FunctionEphemeralStorage"), "{disk:?}");
    let default = default_number("FunctionEphemeralStorage");
    assert!((2761.0..=10240.0).contains(&default), "FunctionEphemeralStorage default {default}");
    let own = block(&block(&resource("IndexBuildFunction"), "Properties:", 4), "EphemeralStorage:", 6);
    assert!(has(&own, 8, "Size: !Ref IndexBuildEphemeralStorage"), "{own:?}");
}

#[test]
fn every_alarm_notifies_the_alarm_topic() {
    let condition = entry(&top("Conditions:"), "HasAlarmTopic", 2).expect("the HasAlarmTopic condition");
    assert!(condition.contains("!Not [!Equals [!Ref AlarmTopicArn, '']]"), "{condition}");
    let alarms = alarms();
    assert!(alarms.len() >= 11, "{} alarms", alarms.len());
    for (name, props) in &alarms {
        let actions = value(props, "AlarmActions").unwrap_or_else(|| panic!("{name} has no AlarmActions"));
        assert_eq!(actions, "!If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref 'AWS::NoValue']", "{name}");
    }
}

#[test]
fn every_function_has_an_alarm_on_its_lambda_errors() {
    let errors = alarms_on("AWS/Lambda", "Errors");
    for (f, _) in functions() {
        // By reference, or by the name the function is given.
        let props = block(&resource(f), "Properties:", 4);
        let wanted = [Some(format!("!Ref {f}")), value(&props, "FunctionName")];
        assert!(
            errors.iter().any(|(_, p)| wanted[0] == dimension(p, "FunctionName")
                || (wanted[1].is_some() && wanted[1] == dimension(p, "FunctionName"))),
            "no alarm on the Lambda Errors of {f}"
        );
    }
}

#[test]
fn a_version_too_large_for_the_memory_has_an_alarm_on_the_index_the_template_serves() {
    let alarm = alarms_on("Sextant", "IndexTooLarge");
    assert!(
        alarm.iter().any(|(_, p)| dimension(p, "Index").as_deref() == Some("!Ref IndexId")),
        "no alarm on Sextant IndexTooLarge by Index = IndexId"
    );
}

#[test]
fn api_gateway_5xx_has_an_alarm_on_the_apis_stage() {
    // The REST API's metrics are named by the API's name and the stage's.
    let (name, stage) = (Some(property("Api", "Name")), Some(property("Api", "StageName")));
    assert!(
        alarms_on("AWS/ApiGateway", "5XXError")
            .iter()
            .any(|(_, p)| dimension(p, "ApiName") == name && dimension(p, "Stage") == stage),
        "no alarm on API Gateway's 5XXError of ApiName {name:?}, Stage {stage:?}"
    );
}

#[test]
fn answers_503_have_an_alarm_on_the_metric_the_code_counts_them_in() {
    let line = |status: u16| -> serde_json::Value {
        serde_json::from_str(&emf_line(&AccessRecord::default(), "api", status, 1.0, 0)).unwrap()
    };
    let (unavailable, ok, server_error) = (line(503), line(200), line(500));
    let spec = &unavailable["_aws"]["CloudWatchMetrics"][0];
    let namespace = spec["Namespace"].as_str().unwrap();
    // The declared metrics that are 1 for a 503, and 0 for a 200 and for another 5xx.
    let counting_503: Vec<&str> = spec["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["Name"].as_str())
        .filter(|m| unavailable[*m] == 1 && ok[*m] == 0 && server_error[*m] == 0)
        .collect();
    assert!(!counting_503.is_empty(), "no metric of the EMF line counts 503s: {unavailable}");
    let watched = alarms().iter().any(|(_, p)| {
        value(p, "Namespace").as_deref() == Some(namespace)
            && value(p, "MetricName").is_some_and(|m| counting_503.contains(&m.as_str()))
            && dimension(p, "Service").as_deref() == unavailable["Service"].as_str()
    });
    assert!(watched, "no alarm on {namespace} {counting_503:?} (Service {}), the 503s", unavailable["Service"]);
}

#[test]
fn the_key_table_and_the_index_bucket_outlive_the_stack() {
    for name in ["KeysTable", "IndexBucket"] {
        let r = resource(name);
        for policy in ["DeletionPolicy: Retain", "UpdateReplacePolicy: Retain"] {
            assert!(has(&r, 4, policy), "{name} has no {policy}");
        }
    }
}

/// The state `name` of the build workflow, joined into one line (see [`joined`]).
fn workflow_state(name: &str) -> String {
    let lines: Vec<&str> = resource("IndexBuildWorkflow");
    let start = lines.iter().position(|l| l.trim() == format!("{name}:")).unwrap_or_else(|| panic!("no {name}"));
    joined(&lines, start)
}

#[test]
fn a_failed_build_removes_its_files_and_what_a_crash_leaves_expires() {
    // The workflow's failure path reports, then runs the clean step on the execution's build.
    let state = workflow_state;
    assert!(state("ReportFailure").contains("Next: CleanBuild"), "{}", state("ReportFailure"));
    let clean = state("CleanBuild");
    for part in [
        "Resource: arn:aws:states:::lambda:invoke",
        "FunctionName: ${BuildFunctionArn}",
        "step: clean",
        "job.$: $$.Execution.Input",
        "build_id.$: $$.Execution.Name",
        "Next: ReleaseLease",
    ] {
        assert!(clean.contains(part), "CleanBuild lacks {part:?}: {clean}");
    }
    // The step the state names is one the function runs.
    let event = serde_json::json!({"step": "clean", "job": {"index_id": "x"}, "build_id": "run-1"});
    assert!(serde_json::from_value::<sextant_aws::build_steps::StepEvent>(event).is_ok());
    // The builds' prefix of this stack's index (the workflow's target) expires.
    let rules = property("IndexBucket", "LifecycleConfiguration");
    assert!(
        rules.contains("Id: ExpireAbandonedBuilds Status: Enabled Prefix: !Sub indexes/${IndexId}/builds/"),
        "{rules}"
    );
    assert!(TEMPLATE.contains("SEXTANT_BUILD_TARGET: !Sub s3://${IndexBucket}/indexes/${IndexId}\n"));
}

/// The encode map reads its items from the plan's list in S3 and writes its results there,
/// as a Distributed Map whose child executions the workflow may start: no list of shards
/// or of results passes through the state (256 KiB), and more than an Inline Map's 40 run
/// at once.
#[test]
fn the_encode_map_is_distributed_and_reads_and_writes_s3() {
    let encode = workflow_state("Encode");
    for part in [
        "Mode: DISTRIBUTED",
        "ItemReader: Resource: arn:aws:states:::s3:getObject",
        "Bucket.$: $.tasks_bucket Key.$: $.tasks_key",
        "ResultWriter: Resource: arn:aws:states:::s3:putObject",
        "MaxConcurrency: ${Concurrency}",
    ] {
        assert!(encode.contains(part), "Encode lacks {part:?}: {encode}");
    }
    assert!(!encode.contains("ItemsPath"), "{encode}");
    assert!(!workflow_state("Merge").contains("encoded.$"), "the merge reads the encode reports from S3");
    // The fields the map reads are the plan step's.
    let plan = serde_json::to_value(sextant_aws::build_steps::PlanOutput {
        build_id: "b".into(),
        job: serde_json::Value::Null,
        unchanged: false,
        task_count: 0,
        tasks_bucket: String::new(),
        tasks_key: String::new(),
        index_shards: 0,
        merges_key: String::new(),
        part_count: 0,
        parts_key: String::new(),
        report: Default::default(),
    })
    .unwrap();
    assert!(plan.get("tasks_bucket").is_some() && plan.get("tasks_key").is_some() && plan.get("tasks").is_none());
    assert!(plan.get("index_shards").is_some() && plan.get("merges_key").is_some(), "what MergeShards reads");
    assert!(plan.get("part_count").is_some() && plan.get("parts_key").is_some(), "what InParts and PlanParts read");
    let start = statement("IndexBuildWorkflow", "RunEncodeMap");
    assert!(start.contains("states:StartExecution") && start.contains("stateMachine:${AWS::StackName}-index-build"));
}

/// A sharded build merges each index shard in its own invocation, a Distributed Map that
/// reads the shards from the plan's list in S3, then publishes once; a single index still
/// merges in one. Every step the states name is one the function runs.
#[test]
fn a_sharded_build_merges_each_index_shard_in_a_distributed_map_then_publishes() {
    let state = workflow_state;
    assert!(state("Encode").contains("Next: Sharded"), "{}", state("Encode"));
    let choice = state("Sharded");
    for part in ["Variable: $.index_shards NumericGreaterThan: 0 Next: MergeShards", "Default: Merge"] {
        assert!(choice.contains(part), "Sharded lacks {part:?}: {choice}");
    }
    let merges = state("MergeShards");
    for part in [
        "Mode: DISTRIBUTED",
        "ItemReader: Resource: arn:aws:states:::s3:getObject",
        "Bucket.$: $.tasks_bucket Key.$: $.merges_key",
        "step: merge_shard",
        "shard.$: $$.Map.Item.Value",
        "ResultWriter: Resource: arn:aws:states:::s3:putObject",
        "MaxConcurrency: ${Concurrency}",
        "Next: ReportFailure",
        "Next: Publish",
    ] {
        assert!(merges.contains(part), "MergeShards lacks {part:?}: {merges}");
    }
    assert!(!merges.contains("ItemsPath"), "{merges}");
    let publish = state("Publish");
    for part in ["step: publish", "job.$: $.job", "build_id.$: $.build_id", "Next: Finish", "Next: ReportFailure"] {
        assert!(publish.contains(part), "Publish lacks {part:?}: {publish}");
    }
    for step in [
        serde_json::json!({"step": "merge_shard", "job": {}, "build_id": "b", "shard": 2}),
        serde_json::json!({"step": "publish", "job": {}, "build_id": "b"}),
    ] {
        assert!(serde_json::from_value::<sextant_aws::build_steps::StepEvent>(step).is_ok());
    }
}

/// A sharded build plans each corpus part in its own invocation, a Distributed Map that
/// reads the parts from the plan step's list in S3, then gathers them into what the encode
/// Map and the Map of merges read.
#[test]
fn a_sharded_build_plans_each_corpus_part_in_a_distributed_map_then_gathers() {
    let state = workflow_state;
    assert!(state("Plan").contains("Next: InParts"), "{}", state("Plan"));
    let choice = state("InParts");
    for part in ["Variable: $.part_count NumericGreaterThan: 0 Next: PlanParts", "Default: Changed"] {
        assert!(choice.contains(part), "InParts lacks {part:?}: {choice}");
    }
    let plans = state("PlanParts");
    for part in [
        "Mode: DISTRIBUTED",
        "ItemReader: Resource: arn:aws:states:::s3:getObject",
        "Bucket.$: $.tasks_bucket Key.$: $.parts_key",
        "step: plan_part",
        "part.$: $$.Map.Item.Value",
        "ResultWriter: Resource: arn:aws:states:::s3:putObject",
        "MaxConcurrency: ${Concurrency}",
        "Next: ReportFailure",
        "Next: Gather",
    ] {
        assert!(plans.contains(part), "PlanParts lacks {part:?}: {plans}");
    }
    assert!(!plans.contains("ItemsPath"), "{plans}");
    // The gather answers as the plan of a single index does: Changed reads its answer.
    let gather = state("Gather");
    for part in ["step: gather", "job.$: $.job", "build_id.$: $.build_id", "OutputPath: $.plan", "Next: Changed"] {
        assert!(gather.contains(part), "Gather lacks {part:?}: {gather}");
    }
    for step in [
        serde_json::json!({"step": "plan_part", "job": {}, "build_id": "b", "part": 3}),
        serde_json::json!({"step": "gather", "job": {}, "build_id": "b"}),
    ] {
        assert!(serde_json::from_value::<sextant_aws::build_steps::StepEvent>(step).is_ok());
    }
}

#[test]
fn every_build_goes_through_the_workflow_one_execution_of_an_index_at_a_time() {
    let lines: Vec<&str> = resource("IndexBuildWorkflow");
    let state = workflow_state;
    // Merged or unchanged, a run ends in Finish, which hands the lease on; a failed run
    // releases it after cleaning.
    assert!(state("Merge").contains("Next: Finish"), "{}", state("Merge"));
    assert!(state("Changed").contains("BooleanEquals: true Next: Finish"), "{}", state("Changed"));
    let finish = state("Finish");
    for part in ["step: finish", "job.$: $$.Execution.Input", "End: true", "Next: ReportFailure"] {
        assert!(finish.contains(part), "Finish lacks {part:?}: {finish}");
    }
    assert!(state("CleanBuild").contains("Next: ReleaseLease"), "{}", state("CleanBuild"));
    let release = state("ReleaseLease");
    for part in ["step: finish", "job.$: $$.Execution.Input", "failed: true", "Next: Failed"] {
        assert!(release.contains(part), "ReleaseLease lacks {part:?}: {release}");
    }
    for step in [
        serde_json::json!({"step": "finish", "job": {}}),
        serde_json::json!({"step": "finish", "job": {}, "failed": true}),
    ] {
        assert!(serde_json::from_value::<sextant_aws::build_steps::StepEvent>(step).is_ok());
    }
    // The function starts the workflow it is given by name (no cycle), and may.
    let name = "${AWS::StackName}-index-build";
    assert!(has(&lines, 6, &format!("Name: !Sub {name}")), "the workflow's name");
    let arn = format!("!Sub arn:${{AWS::Partition}}:states:${{AWS::Region}}:${{AWS::AccountId}}:stateMachine:{name}");
    let env = property("IndexBuildFunction", "Environment");
    assert!(env.contains(&format!("SEXTANT_BUILD_WORKFLOW: {arn}")), "{env}");
    let start = statement("IndexBuildFunction", "StartBuildWorkflow");
    assert!(start.contains("Action: states:StartExecution") && start.contains(&format!("Resource: {arn}")), "{start}");
    // The lease is held as long as an execution may run.
    assert!(env.contains("SEXTANT_BUILD_LEASE_SECS: !Ref BuildWorkflowTimeout"), "{env}");
    assert!(has(&lines, 8, "TimeoutSeconds: ${WorkflowTimeout}"), "the workflow's timeout");
    assert!(property("IndexBuildWorkflow", "DefinitionSubstitutions")
        .contains("WorkflowTimeout: !Ref BuildWorkflowTimeout"));
    // Corpus writes and the schedule go to the function, which asks the workflow; nothing
    // starts the workflow directly.
    let events = property("IndexBuildFunction", "Events");
    assert!(events.contains("CorpusChanged: Type: EventBridgeRule"), "{events}");
    let source = format!("Input: '{{\"source\": \"{}\"}}'", crate::BUILD_REQUEST_SOURCE);
    assert!(events.contains("Reindex: Type: Schedule") && events.contains(&source), "{events}");
    assert!(!has(&lines, 6, "Events:"), "the workflow has no event of its own");
    // events/index-build/build-request.json is what the schedule sends.
    let request: serde_json::Value =
        serde_json::from_str(include_str!("../../../events/index-build/build-request.json")).unwrap();
    assert_eq!(request["source"], crate::BUILD_REQUEST_SOURCE);
}

#[test]
fn rate_table_writers_reach_only_their_own_items() {
    // Rate counters are `rate#…` items, build leases `build#<index>` (sextant-aws).
    assert!(include_str!("../../aws/src/dynamo.rs").contains(r#"format!("rate#{}"#));
    assert!(include_str!("../../aws/src/build_lease.rs").contains(r#"format!("build#{index}")"#));
    for f in ["RetrieveFunction", "SearchFunction"] {
        let s = statement(f, "CountRequests");
        assert!(
            s.contains("Action: dynamodb:UpdateItem")
                && s.contains("ForAllValues:StringLike: dynamodb:LeadingKeys: - 'rate#*'"),
            "{f}: {s}"
        );
    }
    let lease = statement("IndexBuildFunction", "BuildLease");
    assert!(lease.contains("ForAllValues:StringLike: dynamodb:LeadingKeys: - 'build#*'"), "{lease}");
    // And no statement on the rate table goes without a condition on the keys.
    for (f, _) in functions() {
        for sid in sids(f) {
            let s = statement(f, sid);
            assert!(!s.contains("RateTable.Arn") || s.contains("dynamodb:LeadingKeys"), "{f}: {s}");
        }
    }
}

#[test]
fn index_build_reads_every_corpus_of_the_bucket_and_nothing_else() {
    let read = statement("IndexBuildFunction", "ReadCorporaIndexes");
    // The stack's corpus and facts, and those of the indexes created through the API.
    assert!(read.contains("!Sub ${IndexBucket.Arn}/corpora/*"), "{read}");
    for line in read.split(" - ").skip(1) {
        let line = line.trim();
        assert!(
            line.starts_with("!Sub ${IndexBucket.Arn}/corpora/")
                || line.starts_with("!Sub ${IndexBucket.Arn}/indexes/"),
            "index-build reads {line:?}: {read}"
        );
    }
    // Every corpus or facts prefix the template hands the builder is in the bucket's
    // `corpora/`: its environment's defaults, and any corpus a job in the template names.
    let mut named: Vec<&str> = resource("IndexBuildFunction")
        .into_iter()
        .filter_map(|l| {
            let l = l.trim();
            ["SEXTANT_BUILD_CORPUS: !Sub ", "SEXTANT_BUILD_FACTS: !Sub "].iter().find_map(|p| l.strip_prefix(p))
        })
        .collect();
    named.extend(TEMPLATE.split("\"corpus\": \"").skip(1).filter_map(|rest| rest.split('"').next()));
    assert!(named.len() >= 2, "{named:?}");
    for location in named {
        assert!(location.starts_with("s3://${IndexBucket}/corpora/") && location.ends_with('/'), "{location}");
    }
}

/// `PUT /v1/indexes/{index}` on AWS: the retrieve function (which the route reaches) writes
/// the index's marker and deletes a created index; both API functions serve the created
/// indexes; a write under any corpus prefix reaches the index-build function, which builds
/// the index it belongs to.
#[test]
fn indexes_created_through_the_api_are_served_by_the_api_functions_and_built_by_index_build() {
    for f in ["RetrieveFunction", "SearchFunction", "IndexBuildFunction"] {
        let env = property(f, "Environment");
        assert!(env.contains("SEXTANT_CATALOG: !Sub s3://${IndexBucket}/"), "{f}: {env}");
    }
    let manage = statement("RetrieveFunction", "ManageCreatedIndexes");
    for part in ["s3:PutObject", "s3:DeleteObject", "Resource: !Sub ${IndexBucket.Arn}/indexes/*"] {
        assert!(manage.contains(part), "{part}: {manage}");
    }
    let write = statement("RetrieveFunction", "WriteDocuments");
    assert!(write.contains("Resource: !Sub ${IndexBucket.Arn}/corpora/*"), "{write}");
    for route in ["CreateIndex", "DeleteIndex"] {
        assert!(property("RetrieveFunction", "Events").contains(&format!("{route}: Type: Api")), "{route}");
    }
    let events = property("IndexBuildFunction", "Events");
    assert!(events.contains("key: [{prefix: 'corpora/'}]"), "{events}");
    // The prefixes the catalog writes are those the grants and the rule name.
    let catalog = include_str!("../../aws/src/catalog.rs");
    for layout in
        [r#"format!("indexes/{id}")"#, r#"format!("corpora/{id}")"#, r#"const MARKERS: &str = "indexes/.created/";"#]
    {
        assert!(catalog.contains(layout), "{layout}");
    }
}

#[test]
fn infra_readme_environment_table_is_what_the_template_sets() {
    let functions = functions();
    let mut set = BTreeSet::new();
    for var in variables(&top("Globals:")) {
        for (_, name) in &functions {
            set.insert((var.clone(), name.clone()));
        }
    }
    for (f, name) in &functions {
        for var in variables(&resource(f)) {
            set.insert((var, name.clone()));
        }
    }
    assert!(set.len() > 20, "{set:?}");
    let mut documented = BTreeSet::new();
    for row in readme_table("| Variable | Functions | Value |") {
        let vars = code_spans(row[0]);
        assert!(!vars.is_empty(), "{row:?}");
        for name in named_functions(row[1], &functions) {
            assert!(
                functions.iter().any(|(_, n)| *n == name),
                "infra/README.md: no function {name:?} in template.yaml"
            );
            for var in &vars {
                documented.insert((var.to_string(), name.clone()));
            }
        }
    }
    let left_out: Vec<_> = set.difference(&documented).collect();
    assert!(
        left_out.is_empty(),
        "template.yaml sets these (variable, function) that infra/README.md leaves out: {left_out:?}"
    );
    let unset: Vec<_> = documented.difference(&set).collect();
    assert!(
        unset.is_empty(),
        "infra/README.md names these (variable, function) that template.yaml does not set: {unset:?}"
    );
}

#[test]
fn infra_readme_iam_table_is_what_the_template_grants() {
    let functions = functions();
    let machines = resources_of_type("AWS::Serverless::StateMachine");
    assert_eq!(machines.len(), 1, "{machines:?}");
    let mut principals: Vec<(&str, String)> = functions.clone();
    principals.push((machines[0], "build workflow".to_string()));
    let mut granted = BTreeSet::new();
    for (res, name) in &principals {
        for action in actions(res) {
            granted.insert((name.clone(), action));
        }
    }
    assert!(granted.len() > 15, "{granted:?}");
    let mut documented = BTreeSet::new();
    for row in readme_table("| Function | Action | Resource |") {
        let listed = code_spans(row[1]);
        assert!(!listed.is_empty(), "{row:?}");
        for name in named_functions(row[0], &functions) {
            assert!(
                principals.iter().any(|(_, n)| *n == name),
                "infra/README.md: no function {name:?} in template.yaml"
            );
            for action in &listed {
                documented.insert((name.clone(), action.to_string()));
            }
        }
    }
    let left_out: Vec<_> = granted.difference(&documented).collect();
    assert!(
        left_out.is_empty(),
        "template.yaml grants these (function, action) that infra/README.md leaves out: {left_out:?}"
    );
    let ungranted: Vec<_> = documented.difference(&granted).collect();
    assert!(
        ungranted.is_empty(),
        "infra/README.md lists these (function, action) that template.yaml does not grant: {ungranted:?}"
    );
}

/// What `sam build` ships: stripped binaries (Lambda counts a function and its layers
/// unzipped, 250 MB in all), built by cargo lambda, which SAM runs only with its beta
/// features on (else `sam build` stops at a prompt): the example configuration opts in,
/// and the instructions name the flag. Cargo lambda adds thin LTO and `panic = "abort"` to a
/// release profile that leaves them out; the profile sets both, so that Lambda runs what the
/// tests run (a handler's panic unwinds into an error answer; the ONNX Runtime loader's
/// fallback catches a panic).
#[test]
fn sam_builds_stripped_binaries_with_its_rust_beta_opted_in() {
    let cargo = include_str!("../../../Cargo.toml");
    let release: Vec<&str> = cargo
        .lines()
        .skip_while(|l| l.trim() != "[profile.release]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .collect();
    assert!(release.iter().any(|l| l.trim() == "strip = true"), "the release profile does not strip: {release:?}");
    for setting in ["panic = \"unwind\"", "lto = false"] {
        assert!(release.iter().any(|l| l.trim() == setting), "the release profile leaves {setting} to cargo lambda");
    }
    let samconfig = include_str!("../../../infra/samconfig.example.toml");
    let section = |name: &str| -> Vec<&str> {
        samconfig.lines().skip_while(|l| l.trim() != name).skip(1).take_while(|l| !l.starts_with('[')).collect()
    };
    for name in ["[default.build.parameters]", "[default.sync.parameters]"] {
        assert!(section(name).iter().any(|l| l.trim().starts_with("beta_features = true")), "{name} does not opt in");
    }
    // The shard functions' loop: the SAM CLI expands it only when asked, and CloudFormation
    // takes the transforms only with CAPABILITY_AUTO_EXPAND.
    assert!(TEMPLATE.contains("Transform: [AWS::LanguageExtensions, AWS::Serverless-2016-10-31]"));
    for name in ["[default.build.parameters]", "[default.deploy.parameters]", "[default.sync.parameters]"] {
        let body = section(name);
        assert!(body.iter().any(|l| l.trim().starts_with("language_extensions = true")), "{name}: {body:?}");
    }
    assert!(section("[default.deploy.parameters]").iter().any(|l| l.contains("CAPABILITY_AUTO_EXPAND")));
    for (doc, text) in [("README.md", include_str!("../../../README.md")), ("infra/README.md", README)] {
        assert!(text.contains("sam build --beta-features --language-extensions"), "{doc} does not name the flags");
    }
    for name in resources_of_type("AWS::Serverless::Function") {
        assert!(has(&resource(name), 6, "BuildMethod: rust-cargolambda"), "{name} is not built by cargo lambda");
    }
}

#[test]
fn a_search_that_misses_a_shard_has_an_alarm_on_the_metric_the_code_counts_it_in() {
    let line = |missing: usize| -> serde_json::Value {
        let record = AccessRecord { shards_missing: Some((missing, 4)), ..AccessRecord::default() };
        serde_json::from_str(&emf_line(&record, "api", 200, 1.0, 0)).unwrap()
    };
    let (degraded, whole) = (line(1), line(0));
    let spec = &degraded["_aws"]["CloudWatchMetrics"][0];
    let namespace = spec["Namespace"].as_str().unwrap();
    // The declared 0/1 metrics that are 1 when a shard is missing and 0 when every one answered.
    let counting: Vec<&str> = spec["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["Name"].as_str())
        .filter(|m| degraded[*m] == 1 && whole[*m] == 0)
        .collect();
    assert!(!counting.is_empty(), "no metric of the EMF line counts a missing shard: {degraded}");
    let watched = alarms().iter().any(|(_, p)| {
        value(p, "Namespace").as_deref() == Some(namespace)
            && value(p, "MetricName").is_some_and(|m| counting.contains(&m.as_str()))
            && dimension(p, "Service").as_deref() == degraded["Service"].as_str()
    });
    assert!(watched, "no alarm on {namespace} {counting:?} (Service {}), a missing shard", degraded["Service"]);
}

/// Cohere's key never sits in a function's environment, where anyone allowed
/// `lambda:GetFunctionConfiguration` reads it: the API functions get the secret's name and
/// read it at cold start, allowed `GetSecretValue` on that secret only, and only when Cohere
/// reranks; the index builder gets neither.
#[test]
fn the_cohere_key_is_read_from_its_secret_not_from_the_environment() {
    assert!(!TEMPLATE.contains("CO_API_KEY") && !TEMPLATE.contains("resolve:secretsmanager"));
    for (f, name) in functions() {
        let lines = resource(f);
        let api = name == "retrieve" || name == "search";
        assert_eq!(variables(&lines).contains(&"SEXTANT_COHERE_KEY_SECRET".to_string()), api, "{f}");
        assert_eq!(sids(f).contains(&"ReadCohereKey"), api, "{f}");
        if api {
            let secret = entry(&block(&lines, "Variables:", 8), "SEXTANT_COHERE_KEY_SECRET", 10).unwrap();
            assert!(secret.contains("RerankWithCohere") && secret.contains("!Ref CohereApiKeySecret"), "{secret}");
            let read = statement(f, "ReadCohereKey");
            assert!(read.contains("Action: secretsmanager:GetSecretValue"), "{read}");
            assert!(read.contains("CohereApiKeySecret") && !read.contains('*'), "this secret only: {read}");
            let at = lines.iter().position(|l| l.trim() == "- Sid: ReadCohereKey").unwrap();
            assert_eq!(lines[at - 1].trim(), "- RerankWithCohere", "{f}: granted only when Cohere reranks");
        }
    }
}

/// The functions that encode (the API's, the builder) attach the models layer; the shard
/// functions answer queries their routers encoded and load no model, so they ship without
/// it: no layer in `Globals`, where it would reach them too.
#[test]
fn only_the_functions_that_encode_attach_the_models_layer() {
    let globals = block(&top("Globals:"), "Function:", 2);
    assert!(entry(&globals, "Layers", 4).is_none(), "a layer in Globals reaches every function");
    let functions = resources_of_type("AWS::Serverless::Function");
    assert!(functions.contains(&"ShardFunction${K}"), "{functions:?}");
    for name in functions {
        let layers = value(&block(&resource(name), "Properties:", 4), "Layers");
        let encodes = ["RetrieveFunction", "SearchFunction", "IndexBuildFunction"].contains(&name);
        match (encodes, layers.as_deref()) {
            (true, Some("- !Ref ModelsLayer")) | (false, None) => {}
            (_, other) => panic!("{name}: Layers {other:?}"),
        }
    }
}

/// A search waits for its shards in two round trips at most (the candidates, then the
/// results' text), each up to `ShardDeadlineMs`: the largest deadline the template takes
/// fits twice, with three seconds for the rest of the search, in the 29 s API Gateway
/// waits for an answer.
#[test]
fn the_largest_shard_deadline_fits_twice_in_api_gateways_wait() {
    let p = parameter("ShardDeadlineMs");
    let max = entry(&p, "MaxValue", 4).expect("ShardDeadlineMs has a MaxValue");
    let max: u64 = max["MaxValue:".len()..].trim().parse().unwrap();
    assert!(2 * max + 3_000 <= 29_000, "ShardDeadlineMs may be {max} ms: twice that leaves no time within 29 s");
    assert!(2.0 * default_number("ShardDeadlineMs") + 3_000.0 <= 29_000.0);
}

/// Every shard count the template takes has its shard numbers, and the largest is the most
/// index shards the builder makes: a stack can serve what its builds write, and no more.
#[test]
fn every_shard_count_has_its_shard_numbers_up_to_the_builders_most() {
    let allowed = parameter("ShardCount").into_iter().find_map(|l| l.trim().strip_prefix("AllowedValues: ["));
    let counts: Vec<usize> = allowed
        .expect("ShardCount's AllowedValues")
        .trim_end_matches(']')
        .split(", ")
        .map(|c| c.trim_matches('\'').parse().unwrap())
        .collect();
    assert_eq!(counts.iter().max(), Some(&sextant_aws::build_job::MAX_INDEX_SHARDS), "{counts:?}");
    for count in counts {
        let numbers: Vec<String> = (0..count.max(1)).map(|k| format!("'{k}'")).collect();
        let line = format!("    '{count}':\n      Numbers: [{}]\n", numbers.join(", "));
        assert!(TEMPLATE.contains(&line), "ShardNumbers lacks {line}");
    }
}
