package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// EnvPrefix starts every environment variable the configuration reads.
const EnvPrefix = "MEMORIA_"

// EnvConfigFile names the config file when --config is not given.
const EnvConfigFile = EnvPrefix + "CONFIG"

// EnvToken is the bearer token the CLI sends to a server given with
// --server (never read from a flag, which other users may see).
const EnvToken = EnvPrefix + "TOKEN"

// Duration is a time.Duration written as "30s", "6h" or "1e7s" in YAML and
// the environment.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration as text.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads "30s"-style text.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

func parseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if v, err := time.ParseDuration(s); err == nil {
		return Duration(v), nil
	}
	// Seconds in float notation, e.g. MemoryOS's µ = 1e7 s.
	if num, ok := strings.CutSuffix(s, "s"); ok {
		if f, err := strconv.ParseFloat(num, 64); err == nil && f >= 0 && f <= float64(math.MaxInt64)/float64(time.Second) {
			return Duration(f * float64(time.Second)), nil
		}
	}
	return 0, fmt.Errorf("invalid duration %q (want e.g. 30s, 5m, 6h)", s)
}

// Load returns the defaults overlaid by the YAML file at path (if path is
// not empty) and then by the environment. It does not validate: flags are
// applied after Load, then Validate.
func Load(path string, environ []string) (Config, error) {
	c := Default()
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		defer f.Close()
		if err := decodeYAML(f, &c); err != nil {
			return c, fmt.Errorf("config: %s: %w", path, err)
		}
	}
	if err := applyEnv(&c, environ); err != nil {
		return c, err
	}
	return c, nil
}

func decodeYAML(r io.Reader, c *Config) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	// Kinds given in the file replace the table as a whole.
	var probe struct {
		Kinds map[string]any `yaml:"kinds"`
	}
	if err := yaml.Unmarshal(data, &probe); err == nil && probe.Kinds != nil {
		c.Kinds = nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// EnvNames lists every environment variable the configuration reads.
func EnvNames() []string {
	var names []string
	walkLeaves(reflect.ValueOf(&Config{}).Elem(), nil, func(path []string, _ reflect.Value) {
		names = append(names, envName(path))
	})
	sort.Strings(names)
	return names
}

func envName(path []string) string {
	return EnvPrefix + strings.ToUpper(strings.Join(path, "_"))
}

// applyEnv overlays MEMORIA_* variables. An unknown MEMORIA_* name is an
// error, so a typo does not silently leave a default in place.
func applyEnv(c *Config, environ []string) error {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, EnvPrefix) {
			env[k] = v
		}
	}
	if len(env) == 0 {
		return nil
	}
	known := map[string]bool{EnvConfigFile: true, EnvToken: true}
	var errs []error
	walkLeaves(reflect.ValueOf(c).Elem(), nil, func(path []string, v reflect.Value) {
		name := envName(path)
		known[name] = true
		raw, ok := env[name]
		if !ok {
			return
		}
		if err := setLeaf(v, raw); err != nil {
			errs = append(errs, fmt.Errorf("config: %s=%q: %w", name, raw, err))
		}
	})
	for _, name := range sortedKeys(env) {
		if !known[name] {
			errs = append(errs, fmt.Errorf("config: unknown environment variable %s (see `memoria config env`)", name))
		}
	}
	return errors.Join(errs...)
}

var durationType = reflect.TypeOf(Duration(0))

// walkLeaves visits every scalar field of a struct with its YAML path.
// Maps are not leaves: they are configured in the file only.
func walkLeaves(v reflect.Value, path []string, visit func([]string, reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		fv := v.Field(i)
		p := append(append([]string(nil), path...), tag)
		switch {
		case fv.Type() == durationType:
			visit(p, fv)
		case fv.Kind() == reflect.Struct:
			walkLeaves(fv, p, visit)
		case fv.Kind() == reflect.Map || fv.Kind() == reflect.Slice:
		default:
			visit(p, fv)
		}
	}
}

func setLeaf(v reflect.Value, raw string) error {
	raw = strings.TrimSpace(raw)
	if v.Type() == durationType {
		d, err := parseDuration(raw)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("want a number")
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v.SetBool(b)
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}

// YAML renders the configuration as a YAML document (for `memoria config`).
func (c Config) YAML() ([]byte, error) {
	return yaml.Marshal(c)
}
