package config

import (
	"testing"

	"github.com/spf13/pflag"
)

// BenchmarkLoadExample measures one start-up load of the example file.
func BenchmarkLoadExample(b *testing.B) {
	env := mapEnv(podEnv)
	for b.Loop() {
		fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
		BindFlags(fs)
		if _, err := Load(fs, []string{"--config", examplePath}, env); err != nil {
			b.Fatal(err)
		}
	}
}
