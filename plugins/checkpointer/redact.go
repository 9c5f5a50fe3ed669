package checkpointer

import (
	"net/url"
	"strings"
)

// redacted replaces every credential in logs and errors.
const redacted = "xxxxx"

// RedactURL returns the URL with every credential it can carry replaced,
// for logs and errors: the userinfo password (every go-redis form: redis://,
// rediss://, unix://, Cluster and Sentinel) and any query parameter whose
// name holds "password" (go-redis' ParseFailoverURL takes the master's as
// `password`; other clients use `sentinel_password`). go-redis reads no
// other credential from a URL. The rest of the query is kept as written, so
// the URL still says where it points.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable redis url>"
	}
	parts := strings.Split(u.RawQuery, "&")
	for i, p := range parts {
		if k, _, ok := strings.Cut(p, "="); ok && isSecretParam(k) {
			parts[i] = k + "=" + redacted
		}
	}
	u.RawQuery = strings.Join(parts, "&")
	return u.Redacted()
}

// redactErr removes the URL's credentials from an error text that may quote
// the URL or only a credential (go-redis' option errors quote values).
func redactErr(err error, rawURL string) string {
	msg := strings.ReplaceAll(err.Error(), rawURL, RedactURL(rawURL))
	for _, s := range urlSecrets(rawURL) {
		msg = strings.ReplaceAll(msg, s, redacted)
	}
	return msg
}

// urlSecrets lists the credentials RedactURL hides, decoded and as written.
func urlSecrets(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	var out []string
	if pw, ok := u.User.Password(); ok && pw != "" {
		_, escaped, _ := strings.Cut(u.User.String(), ":")
		out = append(out, pw, escaped)
	}
	for _, p := range strings.Split(u.RawQuery, "&") {
		k, v, ok := strings.Cut(p, "=")
		if !ok || v == "" || !isSecretParam(k) {
			continue
		}
		out = append(out, v)
		if dv, err := url.QueryUnescape(v); err == nil && dv != v {
			out = append(out, dv)
		}
	}
	return out
}

// isSecretParam says whether a query parameter (raw, as in the URL) names a
// password.
func isSecretParam(rawKey string) bool {
	k, err := url.QueryUnescape(rawKey)
	if err != nil {
		k = rawKey
	}
	return strings.Contains(strings.ToLower(k), "password")
}
