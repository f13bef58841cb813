# frozen_string_literal: true

module Hakari
  class CLI
    # The contract between the CLI (parent) and lib/hakari/autorun.rb (inside the profiled
    # Ruby): the environment variables the CLI sets and the files autorun leaves in the
    # session directory. Both sides load this file, so the names are written down once.
    # It must stay free of profiling code: every Ruby process of the command loads it.
    module Session
      ENV_DIR       = "HAKARI_SESSION"    # session dir made by the CLI; unset = standalone autorun
      ENV_MODE      = "HAKARI_MODE"       # cpu | wall | object | retained | trace
      ENV_MEASURE   = "HAKARI_MEASURE"    # with trace: wall | cpu | allocations
      ENV_ALLOCATIONS = "HAKARI_ALLOCATIONS" # with trace: 1 = Hakari.start(allocations: true)
      ENV_MAX_PATHS = "HAKARI_MAX_PATHS"  # with trace: Hakari.start(max_paths: N)
      ENV_FREQUENCY = "HAKARI_FREQUENCY"  # Hz
      ENV_INTERVAL  = "HAKARI_INTERVAL"   # object mode: objects per sample
      ENV_WATCH     = "HAKARI_WATCH"      # object mode: share of the objects the NEWOBJ hook watches
      ENV_OUTPUT    = "HAKARI_OUTPUT"     # absolute path of the profile file; unset under a session = no file
      ENV_FORMAT    = "HAKARI_FORMAT"     # one of Hakari::FORMATS; unset = from the output's name
      ENV_VERBOSE   = "HAKARI_VERBOSE"    # 1 = Hakari.start(verbose: true)
      ENV_SYNTHESIZE = "HAKARI_SYNTHESIZE" # 0 = Hakari.start(synthesize: false)
      ENV_REPORT    = "HAKARI_REPORT"     # 1 = also leave the text report in the session dir
      ENV_FORK      = "HAKARI_FORK"       # inherit = Hakari.start(fork: :inherit)
      ENV_EVERY     = "HAKARI_EVERY"      # seconds: snapshots every so often into the directory HAKARI_OUTPUT
      ENV_CLAIMED   = "HAKARI_CLAIMED"    # standalone only: pid of the process that profiles
      ALL_ENV = [ENV_DIR, ENV_MODE, ENV_MEASURE, ENV_ALLOCATIONS, ENV_MAX_PATHS, ENV_FREQUENCY, ENV_INTERVAL, ENV_WATCH,
                 ENV_OUTPUT, ENV_FORMAT, ENV_VERBOSE, ENV_SYNTHESIZE, ENV_REPORT, ENV_CLAIMED, ENV_FORK, ENV_EVERY].freeze

      CLAIM_FILE  = "claim"       # created O_EXCL by the first Ruby process; holds its pid
      RESULT_FILE = "result"      # "key<TAB>value" lines: counters, GC deltas, status
      REPORT_FILE = "report.txt"  # the text encoder's output, when ENV_REPORT is set

      module_function

      # Atomically (tmp + rename) so the parent never reads half a file, even if the
      # child is killed while writing.
      def write_result(dir, hash)
        body = hash.map { |k, v| "#{k}\t#{v.to_s.tr("\t\n", "  ")}\n" }.join
        write_atomic(File.join(dir, RESULT_FILE), body)
      end

      # => Hash of String => String, or nil when no process finished profiling
      def read_result(dir)
        path = File.join(dir, RESULT_FILE)
        return nil unless File.file?(path)
        File.readlines(path, chomp: true).to_h { |line| line.split("\t", 2) }
      end

      def write_atomic(path, body)
        tmp = "#{path}.#{Process.pid}.tmp"
        File.binwrite(tmp, body)
        File.rename(tmp, path)
      ensure
        File.unlink(tmp) if tmp && File.exist?(tmp)
      end
    end
  end
end
