//! Strict query-string parsing: unknown parameters, repeated parameters, bad numbers and
//! non-UTF-8 bytes are 400 errors that name the parameter.

use std::collections::HashMap;

use super::error::ApiError;

/// The decoded parameters of one request.
struct Params {
    values: HashMap<String, String>,
}

impl Params {
    /// Decodes `raw` (`application/x-www-form-urlencoded`), allowing only `known` names.
    fn parse(raw: Option<&str>, known: &[&str]) -> Result<Params, ApiError> {
        let mut values = HashMap::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = decode(k, "query string")?;
            let v = decode(v, &k)?;
            if !known.contains(&k.as_str()) {
                let known = if known.is_empty() {
                    "this route takes none".to_string()
                } else {
                    format!("known: {}", known.join(", "))
                };
                return Err(ApiError::bad_request(
                    k.clone(),
                    format!("unknown parameter `{k}` ({known})"),
                ));
            }
            if values.insert(k.clone(), v).is_some() {
                return Err(ApiError::bad_request(
                    k.clone(),
                    format!("parameter `{k}` given twice"),
                ));
            }
        }
        Ok(Params { values })
    }

    fn str(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
}

/// One percent-decoded name or value of a query string; `what` names it in the error.
pub(super) fn decode(s: &str, what: &str) -> Result<String, ApiError> {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| {
            ApiError::bad_request(
                what,
                format!("`{what}` is not valid UTF-8 after percent-decoding"),
            )
        })
}

/// A typed query string: `T` is deserialised (serde, with `serde_path_to_error` naming the
/// parameter) after [`Params::parse`] has refused unknown, repeated and non-UTF-8 parameters
/// with its precise messages. `T` lists its parameter names in [`QueryParams::NAMES`] (a test
/// checks each type's list against the parameters its OpenAPI derive documents).
pub struct Query<T>(pub T);

/// A query-string type: serde's `Deserialize` with `deny_unknown_fields`, and its names.
pub trait QueryParams: serde::de::DeserializeOwned {
    const NAMES: &'static [&'static str];
}

impl<T: QueryParams> Query<T> {
    pub fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        let p = Params::parse(raw, T::NAMES)?;
        // Re-encoded from the checked values so serde_urlencoded parses numbers and booleans
        // from their text (the values are already decoded and valid UTF-8).
        let mut encoded = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &p.values {
            encoded.append_pair(k, v);
        }
        let encoded = encoded.finish();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(encoded.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(Query)
            .map_err(|e| {
                let inner = e.inner().to_string();
                if let Some(name) = inner
                    .strip_prefix("missing field `")
                    .and_then(|r| r.split('`').next())
                {
                    return ApiError::bad_request(name, format!("parameter `{name}` is required"));
                }
                let name = e.path().to_string();
                match p.str(&name) {
                    Some(v) => ApiError::bad_request(
                        name.clone(),
                        format!("parameter `{name}` = {v:?} is invalid: {inner}"),
                    ),
                    None => ApiError::bad_request(name, inner),
                }
            })
    }
}

impl<T: QueryParams, S: Send + Sync> axum::extract::FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Query::parse(parts.uri.query())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct P {
        q: String,
        k: Option<usize>,
        explain: Option<bool>,
    }

    impl QueryParams for P {
        const NAMES: &'static [&'static str] = &["q", "k", "explain"];
    }

    fn err(raw: &str) -> (Option<String>, String) {
        let e = Query::<P>::parse(Some(raw)).err().unwrap();
        (e.field, e.message)
    }

    #[test]
    fn typed_parameters_keep_the_precise_messages() {
        let Query(p) = Query::<P>::parse(Some("q=a+b%21&k=5&explain=true")).unwrap();
        assert_eq!(
            p,
            P {
                q: "a b!".into(),
                k: Some(5),
                explain: Some(true)
            }
        );
        assert_eq!(
            err("q=x&k=abc"),
            (
                Some("k".into()),
                "parameter `k` = \"abc\" is invalid: invalid digit found in string".into()
            )
        );
        assert_eq!(
            err("k=3"),
            (Some("q".into()), "parameter `q` is required".into())
        );
        assert_eq!(
            err("q=x&nope=1"),
            (
                Some("nope".into()),
                "unknown parameter `nope` (known: q, k, explain)".into()
            )
        );
        assert_eq!(err("q=x&q=y").1, "parameter `q` given twice");
        assert_eq!(
            err("q=%ff").1,
            "`q` is not valid UTF-8 after percent-decoding"
        );
        assert!(err("q=x&explain=yes")
            .1
            .starts_with("parameter `explain` = \"yes\""));
    }

    /// `NAMES` of every typed query string equals the parameters its `IntoParams` derive
    /// puts in the OpenAPI document (the same struct fields serde reads): a field added to one
    /// and not the other is refused by `Params::parse` or by the strict check.
    #[test]
    fn every_query_type_names_its_documented_parameters() {
        fn check<T: QueryParams + utoipa::IntoParams>() {
            let mut documented: Vec<String> = T::into_params(|| None)
                .into_iter()
                .map(|p| p.name)
                .collect();
            let mut names: Vec<String> = T::NAMES.iter().map(|n| n.to_string()).collect();
            documented.sort();
            names.sort();
            assert_eq!(names, documented, "{}", std::any::type_name::<T>());
        }
        check::<crate::api::search::SearchParams>();
        check::<crate::api::search::SimilarParams>();
        check::<crate::api::admin::jobs::JobsParams>();
        check::<crate::api::admin::judgments::JudgmentsParams>();
        check::<crate::api::admin::judgments::QrelsParams>();
        check::<crate::api::admin::labels::ReservationsParams>();
        check::<crate::api::admin::documents::BatchParams>();
        check::<crate::api::admin::models::UploadParams>();
    }
}
