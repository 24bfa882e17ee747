// Package logging builds replicafed's process logger: zap behind logr (zapr),
// configured from config.Logging, with klog routed to the same logger.
package logging

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"

	"github.com/replicafed/replicafed/config"
)

// New builds the logger from cfg, writing to stderr, and makes klog (and so
// client-go) log through it with a matching verbosity. Pass the result to
// ctrl.SetLogger.
func New(cfg config.Logging) (logr.Logger, error) {
	log, err := NewWithWriter(cfg, os.Stderr)
	if err != nil {
		return logr.Discard(), err
	}
	if err := routeKlog(log, cfg.Verbosity()); err != nil {
		return logr.Discard(), err
	}
	return log, nil
}

// routeKlog sends klog output to log. klog filters V(n) calls by its own -v
// before they reach the logger, so -v is raised to the same verbosity.
func routeKlog(log logr.Logger, verbosity int) error {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	if err := fs.Set("v", strconv.Itoa(verbosity)); err != nil {
		return fmt.Errorf("setting klog verbosity: %w", err)
	}
	klog.SetLogger(log)
	return nil
}

// NewWithWriter builds the logger from cfg, writing to w, without touching
// global state.
func NewWithWriter(cfg config.Logging, w io.Writer) (logr.Logger, error) {
	lvl, err := config.ParseLevel(cfg.Level)
	if err != nil {
		return logr.Discard(), fmt.Errorf("logging.level: %w", err)
	}
	level := zap.NewAtomicLevelAt(zapcore.Level(lvl))

	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	encCfg.EncodeLevel = levelEncoder
	var enc zapcore.Encoder
	if cfg.Format == config.FormatConsole || cfg.Development {
		encCfg.EncodeLevel = capitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(encCfg)
	} else {
		enc = zapcore.NewJSONEncoder(encCfg)
	}

	opts := []zap.Option{zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel)}
	if cfg.Development {
		opts = []zap.Option{zap.AddCaller(), zap.AddStacktrace(zapcore.WarnLevel), zap.Development()}
	}
	core := zapcore.NewCore(enc, zapcore.AddSync(w), level)
	// "v" carries the logr verbosity, so V(2) lines say v=2 instead of a
	// zap level name such as Level(-2).
	return zapr.NewLoggerWithOptions(zap.New(core, opts...), zapr.LogInfoLevel("v")), nil
}

// levelEncoder names every logr V level above 0 "debug"; the "v" field
// holds the exact verbosity.
func levelEncoder(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) {
	if l < zapcore.DebugLevel {
		l = zapcore.DebugLevel
	}
	zapcore.LowercaseLevelEncoder(l, enc)
}

func capitalLevelEncoder(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) {
	if l < zapcore.DebugLevel {
		l = zapcore.DebugLevel
	}
	zapcore.CapitalLevelEncoder(l, enc)
}
