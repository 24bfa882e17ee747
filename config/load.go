package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// configFlag names the config file flag.
const configFlag = "config"

// BindFlags registers --config and one flag per scalar setting on fs; the
// help text names each flag's environment variable.
func BindFlags(fs *pflag.FlagSet) {
	fs.String(configFlag, "", "path of the YAML config file (env "+ConfigEnv+")")
	for _, s := range settings {
		if s.noFlag {
			continue
		}
		name := FlagName(s.key)
		usage := s.usage + " (env " + EnvName(s.key) + ")"
		switch d := s.def.(type) {
		case string:
			fs.String(name, d, usage)
		case v1alpha1.MoveBackPolicy:
			fs.String(name, string(d), usage)
		case bool:
			fs.Bool(name, d, usage)
		case int:
			fs.Int(name, d, usage)
		case float32:
			fs.Float32(name, d, usage)
		case time.Duration:
			fs.Duration(name, d, usage)
		case []Peer:
			fs.String(name, "", usage)
		case []string:
			fs.StringSlice(name, d, usage)
		default:
			panic(fmt.Sprintf("config: no flag kind for %s (%T)", s.key, s.def))
		}
	}
}

// Load parses args into fs (unless fs was already parsed; fs must have been
// passed to BindFlags), then builds the Config from the defaults, the YAML
// file named by --config or $REPLICAFED_CONFIG, REPLICAFED_* environment
// variables read through lookupEnv (nil reads none), and flags, each layer
// overriding the one before. Empty-valued variables count as unset. Empty
// derived keys are resolved (see Raft.ID, Raft.AdvertiseAddress and
// Clusters.SecretNamespace) and the result is validated. All problems are
// returned together, each naming its key.
func Load(fs *pflag.FlagSet, args []string, lookupEnv func(string) (string, bool)) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	path, err := configPath(fs, args, lookupEnv)
	if err != nil {
		return nil, err
	}
	v := viper.New()
	for _, s := range settings {
		v.SetDefault(s.key, s.def)
	}
	raw, err := readConfigFile(v, path)
	if err != nil {
		return nil, err
	}
	fromEnv, err := mergeEnv(v, lookupEnv)
	if err != nil {
		return nil, err
	}
	if err := bindSettingFlags(v, fs); err != nil {
		return nil, err
	}

	cfg, decodeErrs, failed := decodeSettings(v, fs, raw, fromEnv)
	errs := append(unknownKeys(raw), decodeErrs...)
	cfg.resolve(lookupEnv, os.Hostname)
	for _, fe := range FieldErrors(cfg.Validate()) {
		if !failed[settingOf(fe.Key)] {
			errs = append(errs, fe)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// configPath parses args into fs unless already parsed and returns the config
// file named by --config, else by $REPLICAFED_CONFIG ("" for none).
func configPath(fs *pflag.FlagSet, args []string, lookupEnv func(string) (string, bool)) (string, error) {
	if !fs.Parsed() {
		if err := fs.Parse(args); err != nil {
			return "", fmt.Errorf("parsing flags: %w", err)
		}
	}
	path, err := fs.GetString(configFlag)
	if err != nil {
		return "", fmt.Errorf("reading --%s (was BindFlags called?): %w", configFlag, err)
	}
	if path == "" {
		path, _ = lookupEnv(ConfigEnv)
	}
	return path, nil
}

// readConfigFile loads the file at path (none when empty) into v and returns
// it also as written, for the checks viper's lower-casing would defeat.
func readConfigFile(v *viper.Viper, path string) (map[string]any, error) {
	if path == "" {
		return nil, nil
	}
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("reading config file %q: %w", path, err)
	}
	return readRaw(path)
}

// mergeEnv merges the non-empty REPLICAFED_* variables into v over the file
// and returns the keys they set.
func mergeEnv(v *viper.Viper, lookupEnv func(string) (string, bool)) (map[string]bool, error) {
	// Environment variables go in as a config layer merged over the file:
	// viper itself would read os.Getenv, which tests must not touch.
	env := map[string]any{}
	fromEnv := map[string]bool{}
	for _, s := range settings {
		if val, ok := lookupEnv(EnvName(s.key)); ok && val != "" {
			setPath(env, s.key, val)
			fromEnv[s.key] = true
		}
	}
	if len(env) > 0 {
		if err := v.MergeConfigMap(env); err != nil {
			return nil, fmt.Errorf("merging environment variables: %w", err)
		}
	}
	return fromEnv, nil
}

// bindSettingFlags makes each setting's flag, when given, override v.
func bindSettingFlags(v *viper.Viper, fs *pflag.FlagSet) error {
	for _, s := range settings {
		if s.noFlag {
			continue
		}
		if err := v.BindPFlag(s.key, fs.Lookup(FlagName(s.key))); err != nil {
			return fmt.Errorf("binding flag --%s (was BindFlags called?): %w", FlagName(s.key), err)
		}
	}
	return nil
}

// decodeSettings decodes every setting from the merged layers into a new
// Config. A setting that fails is reported, marked in failed and left at its
// default, so validation can go on without repeating its problem.
func decodeSettings(v *viper.Viper, fs *pflag.FlagSet, raw map[string]any, fromEnv map[string]bool) (*Config, []error, map[string]bool) {
	cfg := &Config{}
	var errs []error
	failed := map[string]bool{}
	root := reflect.ValueOf(cfg).Elem()
	for _, s := range settings {
		val := v.Get(s.key)
		if reflect.TypeOf(s.def).Kind() == reflect.Slice && !fromEnv[s.key] && !flagChanged(fs, s) {
			// Viper lower-cases map keys inside lists, which would change
			// label keys; take lists from the file as written.
			if rv, ok := lookupRaw(raw, s.key); ok {
				val = rv
			}
		}
		if val == nil {
			val = s.def
		}
		out := fieldByKey(root, s.key).Addr().Interface()
		if derrs := decodeSetting(s.key, val, out); len(derrs) > 0 {
			errs = append(errs, derrs...)
			failed[s.key] = true
			// Validate the rest against the default so one run lists
			// every problem without repeating this one.
			_ = decodeSetting(s.key, s.def, out)
		}
	}
	return cfg, errs, failed
}

// settingOf maps a problem key such as raft.peers[1].id to its setting key.
func settingOf(key string) string {
	if i := strings.IndexByte(key, '['); i >= 0 {
		return key[:i]
	}
	return key
}

func flagChanged(fs *pflag.FlagSet, s setting) bool {
	return !s.noFlag && fs.Changed(FlagName(s.key))
}

// resolve fills the keys whose empty default means "derive from elsewhere".
func (c *Config) resolve(lookupEnv func(string) (string, bool), hostname func() (string, error)) {
	if c.Raft.ID == "" {
		if pod, ok := lookupEnv("POD_NAME"); ok && pod != "" {
			c.Raft.ID = pod
		} else if h, err := hostname(); err == nil {
			c.Raft.ID = h
		}
	}
	if c.Clusters.SecretNamespace == "" {
		c.Clusters.SecretNamespace = c.Hub.Namespace
	}
	if c.Raft.AdvertiseAddress == "" {
		for _, p := range c.Raft.Peers {
			if p.ID == c.Raft.ID {
				c.Raft.AdvertiseAddress = p.Address
				return
			}
		}
		c.Raft.AdvertiseAddress = advertisable(c.Raft.BindAddress)
	}
}

// readRaw reads the file again without viper, keeping the case of keys.
func readRaw(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file %q: %w", path, err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parsing config file %q: %w", path, err)
	}
	return raw, nil
}

// unknownKeys reports every key in the file that is neither a setting nor a
// section holding settings. Keys match case-insensitively, as viper does.
func unknownKeys(raw map[string]any) []error {
	leaves := map[string]bool{}
	sections := map[string]bool{}
	for _, s := range settings {
		k := strings.ToLower(s.key)
		leaves[k] = true
		for i := strings.LastIndex(k, "."); i > 0; i = strings.LastIndex(k, ".") {
			k = k[:i]
			sections[k] = true
		}
	}
	var errs []error
	var walk func(m map[string]any, prefix string)
	walk = func(m map[string]any, prefix string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			lp := strings.ToLower(path)
			switch {
			case leaves[lp]:
			case sections[lp]:
				switch sub := m[k].(type) {
				case map[string]any:
					walk(sub, path)
				case nil:
				default:
					errs = append(errs, &FieldError{Key: path, Reason: fmt.Sprintf("must be a mapping, got %T", m[k])})
				}
			default:
				errs = append(errs, &FieldError{Key: path, Reason: "unknown key"})
			}
		}
	}
	walk(raw, "")
	return errs
}

// lookupRaw finds a dotted key in the raw file, matching case-insensitively.
func lookupRaw(raw map[string]any, key string) (any, bool) {
	var cur any = raw
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		found := false
		for k, v := range m {
			if strings.EqualFold(k, part) {
				cur, found = v, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return cur, true
}

// setPath stores val under a dotted key in nested maps.
func setPath(m map[string]any, key string, val any) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = val
}

// fieldByKey returns the Config field a dotted key names, by mapstructure
// tag. A key without a field is a bug in the settings table.
func fieldByKey(v reflect.Value, key string) reflect.Value {
	for _, part := range strings.Split(key, ".") {
		t := v.Type()
		found := false
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).Tag.Get("mapstructure") == part {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			panic(fmt.Sprintf("config: setting %q has no field", key))
		}
	}
	return v
}

// decodeSetting decodes one setting's value into out, reporting errors and
// unknown keys inside list items under the setting's key.
func decodeSetting(key string, val any, out any) []error {
	var md mapstructure.Metadata
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           out,
		Metadata:         &md,
		WeaklyTypedInput: true,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			peersHook, staticClustersHook, mapstructure.StringToTimeDurationHookFunc(),
			// clusters.static[].taints[].timeAdded, when YAML left it a string.
			mapstructure.StringToTimeHookFunc(time.RFC3339),
			// Lists of plain strings from the environment: "a,b".
			mapstructure.StringToSliceHookFunc(",")),
	})
	if err != nil {
		return []error{&FieldError{Key: key, Reason: "building decoder: " + err.Error()}}
	}
	if err := dec.Decode(val); err != nil {
		return []error{&FieldError{Key: key, Reason: fmt.Sprintf("cannot use %s: %s", quoteValue(val), cleanDecodeError(err))}}
	}
	var errs []error
	sort.Strings(md.Unused)
	for _, u := range md.Unused {
		sep := "."
		if strings.HasPrefix(u, "[") {
			sep = ""
		}
		errs = append(errs, &FieldError{Key: key + sep + u, Reason: "unknown key"})
	}
	return errs
}

func quoteValue(val any) string {
	if s, ok := val.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%v", val)
}

// cleanDecodeError drops mapstructure's empty field name from messages about
// the top-level value.
func cleanDecodeError(err error) string {
	return strings.TrimPrefix(strings.TrimPrefix(err.Error(), "decoding failed due to the following error(s):\n\n"), "'' ")
}

var (
	peersType          = reflect.TypeOf([]Peer{})
	staticClustersType = reflect.TypeOf([]StaticCluster{})
)

// peersHook accepts raft.peers from a flag or environment variable, either
// as id=host:port,id=host:port or as a YAML flow list.
func peersHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String || to != peersType {
		return data, nil
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return []Peer{}, nil
	}
	if strings.HasPrefix(s, "[") {
		return yamlList(s)
	}
	var out []any
	for _, entry := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok {
			return nil, fmt.Errorf("peer %q: want id=host:port", entry)
		}
		out = append(out, map[string]any{"id": id, "address": addr})
	}
	return out, nil
}

// staticClustersHook accepts clusters.static from an environment variable as
// a YAML (or JSON) flow list.
func staticClustersHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String || to != staticClustersType {
		return data, nil
	}
	if strings.TrimSpace(s) == "" {
		return []StaticCluster{}, nil
	}
	return yamlList(s)
}

func yamlList(s string) (any, error) {
	var out []any
	if err := yaml.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("parsing YAML list: %w", err)
	}
	return out, nil
}
