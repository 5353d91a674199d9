use leptos::prelude::*;
use redrive_core::filter::{format_time_input, parse_time, TierFilter};
use redrive_core::Status;

use crate::api::FilterChoices;
use crate::query;

/// The filter form: a plain GET form, so the filter lives in the URL (bookmarkable, shareable)
/// and works without JavaScript. Field names are exactly the `Filter` query parameters.
#[component]
pub fn FilterBar(
    /// Where the form submits: the page it sits on (`/` or `/groups`).
    action: &'static str,
    /// The current query, decoded, to refill the fields with what the user typed.
    pairs: Vec<(String, String)>,
    /// Values present in the store, offered as suggestions.
    choices: FilterChoices,
) -> impl IntoView {
    let v = |name: &str| query::value(&pairs, name).to_string();
    // A datetime-local input only shows `YYYY-MM-DDTHH:MM`; a bookmarked RFC 3339 or epoch-ms
    // value is shown in that form (UTC), anything unparsable as typed.
    let time = |name: &str| {
        let raw = v(name);
        parse_time(name, &raw).map(format_time_input).unwrap_or(raw)
    };
    let status = v("status");
    let status_options = Status::ALL
        .into_iter()
        .map(|s| {
            let selected = status == s.as_str();
            view! {
                <option value=s.as_str() selected=selected>
                    {s.label()}
                </option>
            }
        })
        .collect_view();
    let tier = v("tier");
    let tier_options = TierFilter::ALL
        .into_iter()
        .map(|t| {
            let selected = tier == t.as_str();
            view! { <option value=t.as_str() selected=selected>{t.as_str()}</option> }
        })
        .collect_view();
    let limit = v("limit");
    let unlabelled = matches!(
        v("unlabelled").to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    );
    let came_back = matches!(
        v("came_back").to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    );
    // A replay job's filters come from its page's links; shown (and clearable) only when set.
    let job_field = |name: &'static str, label: &'static str, title: &'static str| {
        let value = v(name);
        (!value.is_empty()).then(|| {
            view! {
                <label title=title>
                    <span>{label}</span>
                    <input type="text" name=name value=value class="mono" />
                </label>
            }
        })
    };
    let replay_job = job_field(
        "replay_job",
        "Replay job",
        "The dead letters this replay job took (empty the field to drop it)",
    );
    let came_back_from_job = job_field(
        "came_back_from_job",
        "Came back from job",
        "The dead letters that came back after this replay job published them (empty the field to drop it)",
    );
    view! {
        <form class="filter-bar" method="get" action=action role="search">
            <label
                class="wide"
                title="Text in the error message, the first 8 KiB of the stack trace or the first 8 KiB of a text or JSON payload (binary payloads are not searched); case-insensitive"
            >
                <span>"Search message, stack trace, payload"</span>
                <input type="search" name="q" value=v("q") placeholder="e.g. timeout" maxlength="256" />
            </label>
            <label>
                <span>"Error class"</span>
                <input type="text" name="error_class" value=v("error_class") />
            </label>
            <label>
                <span>"Error group"</span>
                <input
                    type="text"
                    name="fingerprint"
                    value=v("fingerprint")
                    placeholder="fingerprint"
                    class="mono"
                />
            </label>
            <TextWithChoices
                label="Source topic"
                name="source_topic"
                value=v("source_topic")
                choices=choices.source_topics
            />
            <TextWithChoices
                label="DLQ topic"
                name="dlq_topic"
                value=v("dlq_topic")
                choices=choices.dlq_topics
            />
            <TextWithChoices
                label="Consumer group"
                name="consumer_group"
                value=v("consumer_group")
                choices=choices.consumer_groups
            />
            <label>
                <span>"Status"</span>
                <select name="status">
                    <option value="" selected=status.is_empty()>
                        "live (not deleted)"
                    </option>
                    {status_options}
                </select>
            </label>
            <label title="Automation tier; without one, the archive tier is left out">
                <span>"Tier"</span>
                <select name="tier">
                    <option value="" selected=tier.is_empty()>
                        "all but archive"
                    </option>
                    {tier_options}
                </select>
            </label>
            <label>
                <span>"Label"</span>
                <input type="text" name="label" value=v("label") placeholder="e.g. needs-fix" />
            </label>
            <label class="check">
                <input type="checkbox" name="unlabelled" value="true" checked=unlabelled />
                <span>"No label"</span>
            </label>
            <label class="check" title="Linked by ingest to an earlier dead letter whose replay failed again">
                <input type="checkbox" name="came_back" value="true" checked=came_back />
                <span>"Came back after replay"</span>
            </label>
            {replay_job}
            {came_back_from_job}
            <label class="time">
                <span>"From (UTC)"</span>
                <input type="datetime-local" name="from" value=time("from") />
            </label>
            <label class="time">
                <span>"To (UTC)"</span>
                <input type="datetime-local" name="to" value=time("to") />
            </label>
            {(!limit.is_empty()).then(|| view! { <input type="hidden" name="limit" value=limit /> })}
            <div class="filter-actions">
                <button type="submit">"Apply"</button>
                <a class="button secondary" href=action>
                    "Reset"
                </a>
            </div>
        </form>
    }
}

/// A text field with the store's known values as suggestions (`<datalist>`): a choice for the
/// common case, free text for anything else.
#[component]
fn TextWithChoices(
    label: &'static str,
    name: &'static str,
    value: String,
    choices: Vec<String>,
) -> impl IntoView {
    let list_id = format!("choices-{name}");
    let options = choices
        .into_iter()
        .map(|c| view! { <option value=c></option> })
        .collect_view();
    view! {
        <label>
            <span>{label}</span>
            <input type="text" name=name value=value list=list_id.clone() autocomplete="off" />
            <datalist id=list_id>{options}</datalist>
        </label>
    }
}
