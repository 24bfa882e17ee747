package credentials

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math"
	"strings"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Expiry sources.
const (
	SourceToken       = "token"
	SourceCertificate = "client certificate"
)

// Expiration is when a member's credentials stop working.
type Expiration struct {
	// At is the earliest expiry of the current user's inline credentials.
	At time.Time
	// Source is SourceToken or SourceCertificate, whichever expires at At.
	Source string
}

// Expiry reads when the current context's user's inline credentials expire:
// the token's exp claim when the token is a JWT (as TokenRequest issues), and
// the client certificate's NotAfter. ok is false when neither says. Tokens
// and certificates read from files or plugins are renewed by whoever provides
// them and are not looked at.
func Expiry(cfg *clientcmdapi.Config) (exp Expiration, ok bool) {
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return Expiration{}, false
	}
	user := cfg.AuthInfos[ctx.AuthInfo]
	if user == nil {
		return Expiration{}, false
	}
	if at, found := TokenExpiry(user.Token); found {
		exp, ok = Expiration{At: at, Source: SourceToken}, true
	}
	if at, found := CertificateExpiry(user.ClientCertificateData); found && (!ok || at.Before(exp.At)) {
		exp, ok = Expiration{At: at, Source: SourceCertificate}, true
	}
	return exp, ok
}

// TokenExpiry returns a JWT's exp claim. The signature is not checked: the
// member's API server decides whether the token is good; this only says
// until when it claims to be.
func TokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	secs, err := claims.Exp.Float64()
	// Beyond what time.Unix can represent a token does not expire in any
	// sense that matters.
	if err != nil || math.IsNaN(secs) || secs < 0 || secs > 1<<40 {
		return time.Time{}, false
	}
	return time.Unix(int64(secs), 0).UTC(), true
}

// CertificateExpiry returns the NotAfter of the first certificate in PEM
// data.
func CertificateExpiry(data []byte) (time.Time, bool) {
	for len(data) > 0 {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return time.Time{}, false
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, false
		}
		return cert.NotAfter.UTC(), true
	}
	return time.Time{}, false
}

// Verdict is what an expiry means now.
type Verdict struct {
	// Expiring is true when the credentials expire within the warning
	// period, or did already.
	Expiring bool
	// Reason is Expired, ExpiresSoon or Valid.
	Reason string
	// Message says when, for a condition.
	Message string
}

// Reasons of Verdict.
const (
	ReasonExpired     = "Expired"
	ReasonExpiresSoon = "ExpiresSoon"
	ReasonValid       = "Valid"
)

// Assess judges exp at now with a warning period.
func Assess(exp Expiration, now time.Time, warning time.Duration) Verdict {
	left := exp.At.Sub(now)
	at := exp.At.UTC().Format(time.RFC3339)
	switch {
	case left <= 0:
		return Verdict{Expiring: true, Reason: ReasonExpired,
			Message: fmt.Sprintf("the %s expired at %s; rotate it (replicafed join --rotate)", exp.Source, at)}
	case left < warning:
		return Verdict{Expiring: true, Reason: ReasonExpiresSoon,
			Message: fmt.Sprintf("the %s expires at %s, in %s; rotate it (replicafed join --rotate)", exp.Source, at, roughly(left))}
	default:
		return Verdict{Reason: ReasonValid, Message: fmt.Sprintf("the %s expires at %s", exp.Source, at)}
	}
}

// roughly prints a duration in days, or hours under two days.
func roughly(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	if d >= time.Hour {
		return fmt.Sprintf("%d hours", int(d/time.Hour))
	}
	return d.Truncate(time.Second).String()
}
