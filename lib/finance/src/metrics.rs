//! Common financial metrics, the words people use for them, and the XBRL concepts that
//! have carried them over the years (concepts are renamed: Apple reported
//! `SalesRevenueNet` until 2017 and `RevenueFromContractWithCustomerExcludingAssessedTax`
//! after ASC 606).

use serde::Serialize;

/// The statement a metric belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Statement {
    /// Income statement (statement of operations).
    IncomeStatement,
    /// Balance sheet (statement of financial position).
    BalanceSheet,
    /// Cash flow statement.
    CashFlow,
}

impl Statement {
    /// All three, in the order filings print them.
    pub const ALL: [Statement; 3] = [Statement::IncomeStatement, Statement::BalanceSheet, Statement::CashFlow];

    /// Display title.
    pub fn title(self) -> &'static str {
        match self {
            Statement::IncomeStatement => "Income statement",
            Statement::BalanceSheet => "Balance sheet",
            Statement::CashFlow => "Cash flow statement",
        }
    }
}

/// One metric: its key, label, the phrases that name it and its concepts, most preferred
/// first.
#[derive(Debug, PartialEq)]
pub struct Metric {
    /// Stable key (`revenue`).
    pub key: &'static str,
    /// Display label.
    pub label: &'static str,
    /// Lower-case phrases that name it in a question.
    pub phrases: &'static [&'static str],
    /// XBRL concepts, most preferred first (renames across years included).
    pub concepts: &'static [&'static str],
    /// A balance at a date (balance sheet) rather than a flow over a period.
    pub instant: bool,
    /// Where it appears.
    pub statement: Statement,
}

use Statement::{BalanceSheet as B, CashFlow as C, IncomeStatement as I};

macro_rules! metric {
    ($key:literal, $label:literal, $st:expr, $instant:literal, [$($p:literal),*], [$($c:literal),*]) => {
        Metric {
            key: $key, label: $label, statement: $st, instant: $instant,
            phrases: &[$($p),*], concepts: &[$($c),*],
        }
    };
}

/// Every metric the engine knows, in statement order.
// One metric to a block of lines: rustfmt would put each phrase and concept on a line of its own.
#[rustfmt::skip]
pub static METRICS: &[Metric] = &[
    metric!("revenue", "Revenue", I, false,
        ["revenue", "revenues", "total revenue", "total revenues", "net revenue", "net revenues", "sales", "net sales",
         "total net sales", "top line", "turnover"],
        ["us-gaap:Revenues", "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax",
         "us-gaap:RevenueFromContractWithCustomerIncludingAssessedTax", "us-gaap:SalesRevenueNet",
         "us-gaap:SalesRevenueGoodsNet", "us-gaap:RevenuesNetOfInterestExpense"]),
    metric!("cost_of_revenue", "Cost of revenue", I, false,
        ["cost of revenue", "cost of revenues", "cost of sales", "cost of goods sold", "cogs"],
        ["us-gaap:CostOfRevenue", "us-gaap:CostOfGoodsAndServicesSold", "us-gaap:CostOfGoodsSold",
         "us-gaap:CostOfGoodsAndServiceExcludingDepreciationDepletionAndAmortization", "us-gaap:CostOfServices"]),
    metric!("gross_profit", "Gross profit", I, false,
        ["gross profit", "gross margin", "gross margins"],
        ["us-gaap:GrossProfit"]),
    metric!("research_and_development", "Research and development", I, false,
        ["research and development", "r&d", "r & d", "spend on research", "spent on research", "spending on research",
         "research spending", "research costs", "research expenses", "research expense"],
        ["us-gaap:ResearchAndDevelopmentExpense",
         "us-gaap:ResearchAndDevelopmentExpenseExcludingAcquiredInProcessCost"]),
    metric!("sga", "Selling, general and administrative", I, false,
        ["sg&a", "selling general and administrative", "selling, general and administrative",
         "general and administrative"],
        ["us-gaap:SellingGeneralAndAdministrativeExpense", "us-gaap:GeneralAndAdministrativeExpense"]),
    metric!("operating_expenses", "Operating expenses", I, false,
        ["operating expenses", "opex", "total operating expenses", "costs and expenses", "total costs and expenses"],
        ["us-gaap:OperatingExpenses", "us-gaap:CostsAndExpenses"]),
    metric!("operating_income", "Operating income", I, false,
        ["operating income", "operating profit", "income from operations", "operating loss", "operating earnings",
         "ebit", "operating margin", "operating margins"],
        ["us-gaap:OperatingIncomeLoss"]),
    metric!("interest_expense", "Interest expense", I, false,
        ["interest expense"],
        ["us-gaap:InterestExpense", "us-gaap:InterestExpenseNonoperating", "us-gaap:InterestExpenseDebt"]),
    metric!("pretax_income", "Income before income taxes", I, false,
        ["pretax income", "pre-tax income", "income before taxes", "income before income taxes",
         "earnings before taxes"],
        ["us-gaap:IncomeLossFromContinuingOperationsBeforeIncomeTaxesExtraordinaryItemsNoncontrollingInterest",
         "us-gaap:IncomeLossFromContinuingOperationsBeforeIncomeTaxes\
          MinorityInterestAndIncomeLossFromEquityMethodInvestments",
         "us-gaap:IncomeLossFromContinuingOperationsBeforeIncomeTaxesDomestic"]),
    metric!("income_tax", "Income tax expense", I, false,
        ["income tax", "income taxes", "tax expense", "provision for income taxes", "effective tax"],
        ["us-gaap:IncomeTaxExpenseBenefit"]),
    metric!("net_income", "Net income", I, false,
        ["net income", "net profit", "net earnings", "net loss", "earnings", "profit", "profits", "profitable",
         "profitability", "bottom line", "net margin", "profit margin", "net margins", "profit margins"],
        ["us-gaap:NetIncomeLoss", "us-gaap:ProfitLoss", "us-gaap:NetIncomeLossAvailableToCommonStockholdersBasic"]),
    metric!("eps_basic", "Basic EPS", I, false,
        ["basic eps", "basic earnings per share"],
        ["us-gaap:EarningsPerShareBasic", "us-gaap:EarningsPerShareBasicAndDiluted"]),
    metric!("eps_diluted", "Diluted EPS", I, false,
        ["diluted eps", "diluted earnings per share", "eps", "earnings per share"],
        ["us-gaap:EarningsPerShareDiluted", "us-gaap:EarningsPerShareBasicAndDiluted"]),
    metric!("cash", "Cash and cash equivalents", B, true,
        ["cash and cash equivalents", "cash and equivalents", "cash balance", "cash position", "cash on hand"],
        ["us-gaap:CashAndCashEquivalentsAtCarryingValue",
         "us-gaap:CashCashEquivalentsRestrictedCashAndRestrictedCashEquivalents", "us-gaap:Cash"]),
    metric!("receivables", "Accounts receivable", B, true,
        ["accounts receivable", "receivables"],
        ["us-gaap:AccountsReceivableNetCurrent", "us-gaap:ReceivablesNetCurrent"]),
    metric!("inventory", "Inventories", B, true,
        ["inventory", "inventories"],
        ["us-gaap:InventoryNet"]),
    metric!("current_assets", "Total current assets", B, true,
        ["current assets", "total current assets"],
        ["us-gaap:AssetsCurrent"]),
    metric!("goodwill", "Goodwill", B, true,
        ["goodwill"],
        ["us-gaap:Goodwill"]),
    metric!("total_assets", "Total assets", B, true,
        ["total assets", "assets"],
        ["us-gaap:Assets"]),
    metric!("accounts_payable", "Accounts payable", B, true,
        ["accounts payable", "payables"],
        ["us-gaap:AccountsPayableCurrent"]),
    metric!("current_liabilities", "Total current liabilities", B, true,
        ["current liabilities", "total current liabilities"],
        ["us-gaap:LiabilitiesCurrent"]),
    metric!("long_term_debt", "Long-term debt", B, true,
        ["long-term debt", "long term debt", "total debt", "debt", "borrowings"],
        ["us-gaap:LongTermDebtNoncurrent", "us-gaap:LongTermDebt", "us-gaap:LongTermDebtAndCapitalLeaseObligations",
         "us-gaap:DebtInstrumentCarryingAmount"]),
    metric!("total_liabilities", "Total liabilities", B, true,
        ["total liabilities", "liabilities"],
        ["us-gaap:Liabilities"]),
    metric!("retained_earnings", "Retained earnings", B, true,
        ["retained earnings", "accumulated deficit"],
        ["us-gaap:RetainedEarningsAccumulatedDeficit"]),
    metric!("equity", "Total shareholders' equity", B, true,
        ["shareholders equity", "shareholders' equity", "stockholders equity", "stockholders' equity",
         "shareholder equity", "total equity", "book value", "equity"],
        ["us-gaap:StockholdersEquity",
         "us-gaap:StockholdersEquityIncludingPortionAttributableToNoncontrollingInterest"]),
    metric!("depreciation", "Depreciation and amortization", C, false,
        ["depreciation and amortization", "depreciation", "d&a", "amortization"],
        ["us-gaap:DepreciationDepletionAndAmortization", "us-gaap:DepreciationAndAmortization",
         "us-gaap:DepreciationAmortizationAndAccretionNet", "us-gaap:Depreciation"]),
    metric!("stock_compensation", "Share-based compensation", C, false,
        ["stock-based compensation", "stock based compensation", "share-based compensation", "share based compensation",
         "sbc"],
        ["us-gaap:ShareBasedCompensation", "us-gaap:AllocatedShareBasedCompensationExpense"]),
    metric!("operating_cash_flow", "Cash from operating activities", C, false,
        ["operating cash flow", "operating cash flows", "cash from operations", "cash flow from operations",
         "cash from operating activities", "cash provided by operating activities", "cash generated from operations"],
        ["us-gaap:NetCashProvidedByUsedInOperatingActivities",
         "us-gaap:NetCashProvidedByUsedInOperatingActivitiesContinuingOperations"]),
    metric!("capex", "Capital expenditures", C, false,
        ["capital expenditures", "capital expenditure", "capex", "purchases of property and equipment",
         "capital spending"],
        ["us-gaap:PaymentsToAcquirePropertyPlantAndEquipment", "us-gaap:PaymentsToAcquireProductiveAssets"]),
    metric!("investing_cash_flow", "Cash from investing activities", C, false,
        ["investing cash flow", "cash from investing activities", "cash used in investing activities",
         "investing activities"],
        ["us-gaap:NetCashProvidedByUsedInInvestingActivities",
         "us-gaap:NetCashProvidedByUsedInInvestingActivitiesContinuingOperations"]),
    metric!("buybacks", "Repurchases of common stock", C, false,
        ["share repurchases", "stock repurchases", "buybacks", "buyback", "repurchases", "share buybacks"],
        ["us-gaap:PaymentsForRepurchaseOfCommonStock"]),
    metric!("dividends", "Dividends paid", C, false,
        ["dividends paid", "dividends", "dividend payments"],
        ["us-gaap:PaymentsOfDividends", "us-gaap:PaymentsOfDividendsCommonStock"]),
    metric!("financing_cash_flow", "Cash from financing activities", C, false,
        ["financing cash flow", "cash from financing activities", "cash used in financing activities",
         "financing activities"],
        ["us-gaap:NetCashProvidedByUsedInFinancingActivities",
         "us-gaap:NetCashProvidedByUsedInFinancingActivitiesContinuingOperations"]),
    metric!("free_cash_flow", "Free cash flow", C, false,
        ["free cash flow", "fcf", "cash burn"],
        []),
];

/// Free cash flow is derived: cash from operations minus capital expenditures.
pub const FREE_CASH_FLOW_TERMS: [(&str, f64); 2] = [("operating_cash_flow", 1.0), ("capex", -1.0)];

/// The metric with `key`.
pub fn metric(key: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.key == key)
}

/// The metrics of a statement, in display order.
pub fn statement_metrics(st: Statement) -> impl Iterator<Item = &'static Metric> {
    METRICS.iter().filter(move |m| m.statement == st)
}

/// Every phrase of every metric, normalised, longest first (built once).
fn phrase_table() -> &'static [(String, &'static Metric, &'static str)] {
    static TABLE: std::sync::OnceLock<Vec<(String, &'static Metric, &'static str)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: Vec<(String, &'static Metric, &'static str)> =
            METRICS.iter().flat_map(|m| m.phrases.iter().map(move |p| (super::text::normalize(p), m, *p))).collect();
        t.sort_by_key(|(_, _, p)| std::cmp::Reverse(p.len()));
        t
    })
}

/// Metrics named in a normalised question (lower case, words separated by single spaces),
/// longest phrase first, each span of words used once; returns `(metric, phrase)` in the
/// order they appear.
pub fn find_metrics(normalized: &str) -> Vec<(&'static Metric, &'static str)> {
    let table = phrase_table();
    let mut found: Vec<(usize, &'static Metric, &'static str)> = Vec::new();
    for (pos, i) in super::text::match_phrases(normalized, table.iter().map(|(n, _, _)| n.as_str())) {
        let (_, m, p) = table[i];
        if !found.iter().any(|(_, f, _)| f.key == m.key) {
            found.push((pos, m, p));
        }
    }
    found.sort_by_key(|(pos, _, _)| *pos);
    found.into_iter().map(|(_, m, p)| (m, p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_least_twenty_five_metrics_with_unique_keys() {
        assert!(METRICS.len() >= 25);
        let mut keys: Vec<_> = METRICS.iter().map(|m| m.key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), METRICS.len());
        assert!(metric("revenue").unwrap().concepts.contains(&"us-gaap:SalesRevenueNet"), "pre-ASC 606 name");
    }

    #[test]
    fn longest_phrase_wins_and_each_metric_once() {
        let keys = |q: &str| find_metrics(q).into_iter().map(|(m, _)| m.key).collect::<Vec<_>>();
        assert_eq!(keys("apple net sales 2023"), ["revenue"]);
        assert_eq!(keys("diluted eps and net income"), ["eps_diluted", "net_income"]);
        assert_eq!(keys("operating cash flow"), ["operating_cash_flow"]);
        assert_eq!(keys("total assets versus total liabilities"), ["total_assets", "total_liabilities"]);
        assert_eq!(keys("cost of sales and sales"), ["cost_of_revenue", "revenue"]);
        assert_eq!(keys("what are the main risks"), Vec::<&str>::new());
        assert_eq!(keys("revenue revenues sales"), ["revenue"]);
    }
}
