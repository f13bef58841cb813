# frozen_string_literal: true

# Puts the benches' C helper (bench/ext/cwork) on the load path, building it first with
# bench/build (which builds hakari too) when it is missing or older than its source, so that
# `ruby bench/overhead.rb` works in a fresh clone as the README says.
CWORK_DIR = File.expand_path("ext/cwork", __dir__)
cwork_so = File.join(CWORK_DIR, "cwork.#{RbConfig::CONFIG['DLEXT']}")
unless File.exist?(cwork_so) && File.mtime(cwork_so) >= File.mtime(File.join(CWORK_DIR, "cwork.c"))
  system(File.expand_path("build", __dir__), exception: true)
end
$LOAD_PATH.unshift CWORK_DIR
