// Package credentials judges member kubeconfigs that arrive as Secrets in the
// hub: which of their fields replicafed may honour (Check) and when their
// inline credentials expire (Expiry, Assess). It is pure: it reads parsed
// kubeconfigs and never builds a client.
//
// Whoever can write a labelled Secret in the registry namespace chooses the
// kubeconfig replicafed uses. Inline credentials only reach the server the
// Secret names; an exec plugin runs a command inside replicafed, a file path
// makes it read (and send) its own files, an auth-provider plugin runs
// provider code. So by default only inline fields are accepted, and every
// other non-empty field, including any a future client-go adds, is refused.
package credentials

import (
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Policy says which kubeconfig features beyond inline credentials a member
// Secret may use (config clusters.credentials.*).
type Policy struct {
	// AllowExec accepts users[].exec.
	AllowExec bool
	// AllowFiles accepts users[].tokenFile, client-certificate, client-key
	// and clusters[].certificate-authority.
	AllowFiles bool
	// AllowAuthProvider accepts users[].auth-provider.
	AllowAuthProvider bool
	// AllowInsecureTLS accepts clusters[].insecure-skip-tls-verify and an
	// http:// server.
	AllowInsecureTLS bool
	// AllowProxy accepts clusters[].proxy-url.
	AllowProxy bool
}

// Configuration keys that relax a Policy, named in refusals.
const (
	SettingExec         = "clusters.credentials.allowExec"
	SettingFiles        = "clusters.credentials.allowFiles"
	SettingAuthProvider = "clusters.credentials.allowAuthProvider"
	SettingInsecureTLS  = "clusters.credentials.allowInsecureTLS"
	SettingProxy        = "clusters.credentials.allowProxy"
)

// Refusal is one kubeconfig field a member Secret may not use.
type Refusal struct {
	// Field is the kubeconfig path, e.g. users[admin].exec.
	Field string
	// Setting is the configuration key that would permit it; empty when
	// none does.
	Setting string
	// Detail adds why, when the field alone does not say it.
	Detail string
}

// String says what is refused and how to permit it.
func (r Refusal) String() string {
	msg := r.Field + " is not allowed"
	if r.Detail != "" {
		msg += " (" + r.Detail + ")"
	}
	if r.Setting != "" {
		return msg + ": set " + r.Setting + " to permit it"
	}
	return msg + " in a member kubeconfig Secret"
}

// Message joins refusals into one line.
func Message(rs []Refusal) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, "; ")
}

// gate is how one kubeconfig field is treated.
type gate int

const (
	accept  gate = iota // inline, or harmless
	ignore              // not from the file (set by the loader)
	setting             // only with a setting
	never               // never from a Secret
)

type rule struct {
	gate    gate
	setting string
	allowed func(Policy) bool
}

var (
	files        = rule{setting, SettingFiles, func(p Policy) bool { return p.AllowFiles }}
	execRule     = rule{setting, SettingExec, func(p Policy) bool { return p.AllowExec }}
	authProvider = rule{setting, SettingAuthProvider, func(p Policy) bool { return p.AllowAuthProvider }}
	insecureTLS  = rule{setting, SettingInsecureTLS, func(p Policy) bool { return p.AllowInsecureTLS }}
	proxy        = rule{setting, SettingProxy, func(p Policy) bool { return p.AllowProxy }}
)

// Rules by JSON field name. A field missing here is refused: a kubeconfig
// field that client-go adds later is not honoured until someone decides.
var (
	userRules = map[string]rule{
		"client-certificate-data": {gate: accept},
		"client-key-data":         {gate: accept},
		"token":                   {gate: accept},
		// Basic auth and impersonation act with the Secret's own
		// credentials, which the member authorizes.
		"username":           {gate: accept},
		"password":           {gate: accept},
		"act-as":             {gate: accept},
		"act-as-uid":         {gate: accept},
		"act-as-groups":      {gate: accept},
		"act-as-user-extra":  {gate: accept},
		"extensions":         {gate: accept},
		"client-certificate": files,
		"client-key":         files,
		"tokenFile":          files,
		"auth-provider":      authProvider,
		"exec":               execRule,
		"-":                  {gate: ignore},
	}
	clusterRules = map[string]rule{
		"server":                     {gate: accept}, // checked on its own
		"tls-server-name":            {gate: accept},
		"certificate-authority-data": {gate: accept},
		"disable-compression":        {gate: accept},
		// Cluster extensions only reach exec plugins.
		"extensions":               {gate: accept},
		"certificate-authority":    files,
		"insecure-skip-tls-verify": insecureTLS,
		"proxy-url":                proxy,
		"-":                        {gate: ignore},
	}
	contextRules = map[string]rule{
		"cluster":    {gate: accept},
		"user":       {gate: accept},
		"namespace":  {gate: accept},
		"extensions": {gate: accept},
		"-":          {gate: ignore},
	}
)

// Check returns every field of cfg a member Secret may not use under p,
// sorted by field. Every user, cluster and context is checked, used by the
// current context or not.
func Check(cfg *clientcmdapi.Config, p Policy) []Refusal {
	var out []Refusal
	for _, name := range sortedKeys(cfg.AuthInfos) {
		if u := cfg.AuthInfos[name]; u != nil {
			out = append(out, checkStruct(fmt.Sprintf("users[%s]", name), reflect.ValueOf(*u), userRules, p)...)
		}
	}
	for _, name := range sortedKeys(cfg.Clusters) {
		c := cfg.Clusters[name]
		if c == nil {
			continue
		}
		field := fmt.Sprintf("clusters[%s]", name)
		out = append(out, checkStruct(field, reflect.ValueOf(*c), clusterRules, p)...)
		out = append(out, checkServer(field+".server", c.Server, p)...)
	}
	for _, name := range sortedKeys(cfg.Contexts) {
		if c := cfg.Contexts[name]; c != nil {
			out = append(out, checkStruct(fmt.Sprintf("contexts[%s]", name), reflect.ValueOf(*c), contextRules, p)...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// checkServer refuses a server without TLS unless insecure TLS is allowed:
// it would receive the credentials in clear text.
func checkServer(field, server string, p Policy) []Refusal {
	u, err := url.Parse(server)
	switch {
	case server == "":
		return []Refusal{{Field: field, Detail: "empty"}}
	case err != nil:
		return []Refusal{{Field: field, Detail: "not a URL"}}
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && !p.AllowInsecureTLS:
		return []Refusal{{Field: field, Setting: SettingInsecureTLS, Detail: "http:// sends credentials unencrypted"}}
	case u.Scheme == "http":
		return nil
	default:
		return []Refusal{{Field: field, Detail: fmt.Sprintf("scheme %q, want https", u.Scheme)}}
	}
}

func checkStruct(prefix string, v reflect.Value, rules map[string]rule, p Policy) []Refusal {
	var out []Refusal
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if v.Field(i).IsZero() {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		r, known := rules[name]
		field := prefix + "." + name
		switch {
		case !known:
			out = append(out, Refusal{Field: field, Detail: "not a field replicafed knows"})
		case r.gate == setting && !r.allowed(p):
			out = append(out, Refusal{Field: field, Setting: r.setting})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Warnings returns one sentence per relaxation p turns on, for the start-up
// log.
func Warnings(p Policy) []string {
	var out []string
	if p.AllowExec {
		out = append(out, SettingExec+" is set: an exec plugin in any member kubeconfig Secret runs its command inside replicafed")
	}
	if p.AllowFiles {
		out = append(out, SettingFiles+" is set: member kubeconfig Secrets may make replicafed read files of its own (tokens, keys) and send them to a server of their choice")
	}
	if p.AllowAuthProvider {
		out = append(out, SettingAuthProvider+" is set: member kubeconfig Secrets may run auth-provider plugins inside replicafed")
	}
	if p.AllowInsecureTLS {
		out = append(out, SettingInsecureTLS+" is set: member kubeconfig Secrets may skip TLS verification or use http://")
	}
	if p.AllowProxy {
		out = append(out, SettingProxy+" is set: member kubeconfig Secrets may route replicafed's member traffic through a proxy of their choice")
	}
	return out
}
