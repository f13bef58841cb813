# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/chromium"
require "fileutils"
require "open3"

# The HTML flame graph in a real browser: Debian's Chromium, headless, loads the page from
# file:// and the tests read its DOM, click it and search it. The page must make no request
# but its own load. A screenshot is left in tmp/html_test.png to look at.
class HTMLTest < Minitest::Test
  include ProfileHelpers

  SHOT = File.expand_path("../tmp/html_test.png", __dir__)

  # a wall profile of a program of its own (minitest's idle threads would fill a wall profile
  # taken here): a sleeper the main thread joins, then fib on the main thread and a GC; as HTML
  # and as pprof. The sleeper ends before fib begins: one that woke beside fib would wait for
  # the GVL under its sleep for as long as fib ran, and keep its half of the profile whatever
  # fib's size.
  PROGRAM = <<~'RUBY'
    require "hakari"
    def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
    data = Hakari.start(mode: :wall) do
      Thread.new { sleep 0.05 }.join
      3.times { fib(Integer(ARGV[2] || 23)) }
      GC.start
    end
    Hakari.save(ARGV[0], data)
    Hakari.save(ARGV[1], data)
  RUBY

  def self.files
    @files ||= begin
      dir = Dir.mktmpdir("hakari-html-test-")
      Minitest.after_run { FileUtils.remove_entry(dir) }
      page, pprof = File.join(dir, "profile.html"), File.join(dir, "profile.pb.gz")
      _, err, st = Open3.capture3(RbConfig.ruby, "-I", ENGINE_LIB, "-e", PROGRAM, page, pprof)
      raise "the profiled program failed: #{err}" unless st.success?
      [page, pprof]
    end
  end

  def setup
    @page, pprof = self.class.files
    @profile = Hakari::Native.read(File.binread(pprof))
  end

  def run_program(dir, fib)
    page, pprof = File.join(dir, "#{fib}.html"), File.join(dir, "#{fib}.pb.gz")
    _, err, st = Open3.capture3(RbConfig.ruby, "-I", ENGINE_LIB, "-e", PROGRAM, page, pprof, fib.to_s)
    raise "the profiled program failed: #{err}" unless st.success?
    pprof
  end

  def open_page
    Chromium.open do |b|
      b.goto("file://#{@page}")
      assert_equal "1", b.eval("document.body.dataset.ready"), "the page's script ran to its end"
      yield b
    end
  end

  # the drawn frames: [name, left, width] of each
  def frames(b)
    b.eval("[...document.querySelectorAll('#graph .frame')].map(f => [f.dataset.name, parseFloat(f.style.left), " \
           "parseFloat(f.style.width), f.classList.contains('match')])")
  end

  def test_the_page_shows_the_hottest_frames_and_asks_for_nothing
    open_page do |b|
      drawn = frames(b)
      names = drawn.map(&:first)
      assert_includes names, "Object#fib"
      assert_includes names, "Kernel#sleep"
      assert_includes names, "[GVL blocked]"
      # the outermost fib frame (all three calls share its path) is as wide as its share of the total
      width = b.eval("document.getElementById('graph').clientWidth")
      fib = drawn.select { |n, *| n == "Object#fib" }.map { _3 }.max
      share = cumulative(@profile, "Object#fib").fdiv(total(@profile))
      assert_in_delta share * width, fib, share * width * 0.02 + 2, "fib's widest frame"
      assert_match(/wall/, b.eval("document.getElementById('title').textContent"))
      assert_match(/ruby \d\.\d/, b.eval("document.getElementById('meta').textContent"))
      # the table, sorted by total: the first function row has the largest total
      assert_equal 6, b.eval("document.querySelectorAll('#methods th').length")
      assert_equal ["file://#{@page}"], b.requests.uniq, "no request but the page's own"
      FileUtils.mkdir_p(File.dirname(SHOT))
      b.screenshot(SHOT)
      assert_operator File.size(SHOT), :>, 10_000
    end
  end

  def test_click_zooms_and_search_sums_its_matches
    open_page do |b|
      width = b.eval("document.getElementById('graph').clientWidth")
      # click the widest Object#fib frame: it fills the width, its callers stay, dimmed
      b.eval(<<~JS)
        const fib = [...document.querySelectorAll('#graph .frame')].filter(f => f.dataset.name === 'Object#fib')
          .sort((a, b) => parseFloat(b.style.width) - parseFloat(a.style.width))[0];
        fib.click();
      JS
      drawn = frames(b)
      zoomed = drawn.find { |n, _, w| n == "Object#fib" && (w - width).abs < 1 }
      assert zoomed, "a full-width Object#fib after the click: #{drawn.first(5)}"
      assert_match(/zoomed: .*Object#fib/, b.eval("document.getElementById('crumb').textContent"))
      refute(drawn.any? { |n, *| n == "Kernel#sleep" }, "the sleeper's frames are outside the zoom")
      b.eval("document.getElementById('reset').click()")
      assert(frames(b).any? { |n, *| n == "Kernel#sleep" }, "reset shows everything again")
      # search: matching frames are marked, and their total is summed once per stack
      b.eval("const s = document.getElementById('search'); s.value = 'fib'; s.dispatchEvent(new Event('input'))")
      marked = frames(b).select(&:last).map(&:first).uniq
      assert_equal ["Object#fib"], marked
      text = b.eval("document.getElementById('matches').textContent")
      assert_match(/\A\d+ frames match: [\d.]+ (ms|µs) \([\d.]+%\)\z/, text) # µs below a millisecond
      fib_ms = cumulative(@profile, "Object#fib") / 1e6
      assert_in_delta fib_ms, b.eval("+document.getElementById('matches').dataset.sum") / 1000.0, fib_ms * 0.01 + 0.1
    end
  end

  # hakari diff --html: the new profile's graph, each frame coloured by the change of its share
  def test_diff_page_marks_what_grew_and_what_shrank
    Dir.mktmpdir("hakari-html-diff-") do |dir|
      base, new = run_program(dir, 18), run_program(dir, 30)
      page = File.join(dir, "diff.html")
      _, err, st = Open3.capture3({ "RUBYLIB" => ENGINE_LIB, "RUBYOPT" => nil }, RbConfig.ruby,
                                  File.expand_path("../exe/hakari", __dir__), "diff", base, new, "--html", page)
      assert st.success?, err
      @page = page
      open_page do |b|
        assert_match(/hakari diff/, b.eval("document.getElementById('title').textContent"))
        # each name's largest change (the outermost of a recursion carries it all)
        change = b.eval("[...document.querySelectorAll('#graph .frame')].reduce((m, f) => " \
                        "(m[f.dataset.name] = Math.max(m[f.dataset.name] ?? -1e9, +f.dataset.change), m), {})")
        assert_operator change["Object#fib"], :>, 5, change.inspect
        assert_operator change["Kernel#sleep"], :<, -5, change.inspect
        assert_equal ["file://#{page}"], b.requests.uniq
      end
    end
  end

  def test_thread_selector_and_sortable_table
    open_page do |b|
      options = b.eval("[...document.querySelectorAll('#thread option')].map(o => o.textContent)")
      assert_equal "all", options.first
      assert_operator options.size, :>=, 3, "all and each thread: #{options}"
      # each thread alone: the sleeper's sleep without fib, the main thread's fib without the sleep
      # (which is thread 1 depends on which was sampled first)
      by_thread = options.drop(1).map do |label|
        b.eval(<<~JS)
          { const sel = document.getElementById('thread');
            sel.value = [...sel.options].find(o => o.textContent === #{label.to_json}).value;
            sel.dispatchEvent(new Event('change')); }
        JS
        frames(b).map(&:first)
      end
      assert_equal 1, by_thread.count { |names| names.include?("Kernel#sleep") && !names.include?("Object#fib") }, by_thread
      assert_equal 1, by_thread.count { |names| names.include?("Object#fib") && !names.include?("Kernel#sleep") }, by_thread
      # sort by self, largest first
      b.eval("document.getElementById('thread').value = '0'; document.getElementById('thread').dispatchEvent(new Event('change'))")
      b.eval("document.querySelector('#methods th[data-key=self]').click()")
      selfs = b.eval("[...document.querySelectorAll('#methods tbody tr')].slice(0, 3).map(r => r.cells[0].textContent)")
      top_self = @profile[:samples].group_by { |f, *| f.first[0] }.max_by { |_, rows| rows.sum { _2 } }.first
      assert_equal top_self, selfs.first
    end
  end

  # the state selector keeps one state's samples: blocked shows the sleep and the join, and its
  # total is the profile's blocked time; running shows fib and no blocked leaf
  def test_state_selector_keeps_one_states_samples
    blocked_ns = @profile[:samples].sum { |frames, w| frames.first[0] == "[GVL blocked]" ? w : 0 }
    open_page do |b|
      options = b.eval("[...document.querySelectorAll('#state option')].map(o => o.value)")
      assert_equal ["", "running", "[GVL blocked]"], options.first(3)
      pick = ->(value) { b.eval("{ const s = document.getElementById('state'); s.value = #{value.to_json}; s.dispatchEvent(new Event('change')); }") }
      pick.("[GVL blocked]")
      names = frames(b).map(&:first)
      assert_includes names, "Kernel#sleep"
      assert_includes names, "Thread#join"
      b.eval("const s = document.getElementById('search'); s.value = '.'; s.dispatchEvent(new Event('input'))")
      assert_in_delta blocked_ns / 1000.0, b.eval("+document.getElementById('matches').dataset.sum"), blocked_ns / 1000.0 * 0.001 + 1
      pick.("running")
      names = frames(b).map(&:first)
      assert_includes names, "Object#fib"
      refute_includes names, "[GVL blocked]"
    end
  end
end
