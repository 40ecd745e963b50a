//! Strict query-string parsing: unknown parameters, repeated parameters, bad numbers and
//! non-UTF-8 bytes are 400 errors that name the parameter.

use std::collections::HashMap;

use super::error::ApiError;

/// The decoded parameters of one request.
pub struct Params {
    values: HashMap<String, String>,
}

impl Params {
    /// Decodes `raw` (`application/x-www-form-urlencoded`), allowing only `known` names.
    pub fn parse(raw: Option<&str>, known: &[&str]) -> Result<Params, ApiError> {
        let mut values = HashMap::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = decode(k, "query string")?;
            let v = decode(v, &k)?;
            if !known.contains(&k.as_str()) {
                return Err(ApiError::bad_request(
                    k.clone(),
                    format!("unknown parameter `{k}` (known: {})", known.join(", ")),
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

    pub fn str(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub fn required(&self, name: &str) -> Result<&str, ApiError> {
        self.str(name)
            .ok_or_else(|| ApiError::bad_request(name, format!("parameter `{name}` is required")))
    }

    pub fn parsed<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, ApiError>
    where
        T::Err: std::fmt::Display,
    {
        match self.str(name) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|e| {
                ApiError::bad_request(name, format!("parameter `{name}` = {v:?} is invalid: {e}"))
            }),
        }
    }
}

fn decode(s: &str, what: &str) -> Result<String, ApiError> {
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
