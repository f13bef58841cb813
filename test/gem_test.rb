# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# `gem build` gives a gem that installs offline and works outside the checkout.
class GemTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)

  def test_gem_builds_installs_offline_and_profiles
    Dir.mktmpdir do |dir|
      out, st = Open3.capture2e("gem", "build", File.join(ROOT, "hakari.gemspec"), "--output", File.join(dir, "hakari.gem"),
                                chdir: ROOT)
      assert st.success?, out
      home = File.join(dir, "home")
      out, st = Open3.capture2e({ "GEM_HOME" => home }, "gem", "install", "--local", "--no-document",
                                "--install-dir", home, File.join(dir, "hakari.gem"))
      assert st.success?, out
      # nothing of the checkout's own setup (Bundler's environment under script/lane) reaches it
      env = ENV.keys.grep(/\A(BUNDLE|BUNDLER|RUBYGEMS_GEMDEPS)/).to_h { [_1, nil] }
      env.merge!("GEM_HOME" => home, "GEM_PATH" => home, "RUBYLIB" => nil, "RUBYOPT" => nil)
      script = 'd = Hakari.start(mode: :wall) { sleep 0.02 }; print d[:mode], " ", $LOADED_FEATURES.grep(/hakari\.so/).first'
      out, st = Open3.capture2e(env, RbConfig.ruby, "-rhakari", "-e", script, chdir: dir)
      assert st.success?, out
      assert_match(%r{\Awall #{Regexp.escape(home)}/.*hakari\.so\z}, out, "the installed gem, not the checkout")
      out, st = Open3.capture2e(env, File.join(home, "bin", "hakari"), "record", "-p", "-m", "trace", RbConfig.ruby, "-e", "[1].sum", chdir: dir)
      assert st.success?, out
      assert_match(/Array#sum/, out)
    end
  end
end
