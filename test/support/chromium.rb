# frozen_string_literal: true

require "json"
require "base64"
require "tmpdir"
require "io/nonblock"

# A headless Chromium driven over the DevTools protocol through a pair of pipes
# (--remote-debugging-pipe: NUL-separated JSON on file descriptors 3 and 4), for the tests
# of hakari's HTML pages: no WebSocket, no gem. Only what the tests need: open a page, run
# JavaScript in it, take a screenshot, and list the network requests it made, with the network
# switched off.
class Chromium
  BINARY = ENV.fetch("HAKARI_CHROMIUM", "/usr/bin/chromium")
  # headless, without the background requests a fresh profile would make (the machine may have
  # no network at all), in a throwaway profile directory
  FLAGS = %w[--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
             --disable-component-update --disable-sync --disable-extensions --disable-default-apps
             --remote-debugging-pipe --window-size=1280,900].freeze

  def self.available? = File.executable?(BINARY)

  def self.open
    browser = new
    yield browser
  ensure
    browser&.close
  end

  attr_reader :requests

  def initialize
    @dir = Dir.mktmpdir("hakari-chromium-")
    to_browser_r, @to_browser = IO.pipe
    @from_browser, from_browser_w = IO.pipe
    # Ruby makes its pipes non-blocking, and the flag goes with the descriptor: Chromium's
    # blocking reads would fail at once and it would drop the connection
    [to_browser_r, from_browser_w].each { |io| io.nonblock = false }
    # the sanitizer pass preloads libasan into Ruby; Chromium must not inherit it (it hangs)
    clean_env = { "LD_PRELOAD" => nil, "ASAN_OPTIONS" => nil }
    # in a process group of its own: /usr/bin/chromium is a shell script, and killing it alone
    # would leave the browser it started running
    @pid = Process.spawn(clean_env, BINARY, *FLAGS, "--user-data-dir=#{@dir}", "about:blank", pgroup: true,
                         3 => to_browser_r, 4 => from_browser_w, %i[out err] => (ENV["HAKARI_CHROMIUM_LOG"] || File::NULL))
    [to_browser_r, from_browser_w].each(&:close)
    @next_id = 0
    @buffer = +""
    @events = []
    @requests = []
    attach
  rescue StandardError
    close # a browser that never answered is not left running
    raise
  end

  # the page's DevTools session, with the network off
  def attach
    target = call("Target.getTargets")["targetInfos"].find { |t| t["type"] == "page" }
    @session = call("Target.attachToTarget", { targetId: target["targetId"], flatten: true })["sessionId"]
    %w[Page.enable Runtime.enable Network.enable].each { |m| call(m, session: @session) }
    # the network is off for the page: a request it made would fail, not reach anything (and is
    # still listed in requests)
    call("Network.emulateNetworkConditions", { offline: true, latency: 0, downloadThroughput: -1, uploadThroughput: -1 },
         session: @session)
  end
  private :attach

  # navigates to url and waits for its load event
  def goto(url, timeout: 20)
    @events.reject! { |e| e["method"] == "Page.loadEventFired" } # a previous page's
    call("Page.navigate", { url: url }, session: @session)
    wait_event("Page.loadEventFired", timeout)
  end

  # the value of a JavaScript expression in the page (awaited when it is a promise)
  def eval(expression)
    r = call("Runtime.evaluate", { expression: expression, returnByValue: true, awaitPromise: true }, session: @session)
    raise "page error: #{r["exceptionDetails"]}" if r["exceptionDetails"]
    r.dig("result", "value")
  end

  def screenshot(path)
    data = call("Page.captureScreenshot", { format: "png" }, session: @session)["data"]
    File.binwrite(path, Base64.decode64(data))
  end

  def close
    # a browser that could not start (no binary: the spawn's own error says so) has no process
    if @pid
      begin
        call("Browser.close", timeout: 5)
      rescue StandardError
        begin
          Process.kill("KILL", -@pid)
        rescue Errno::ESRCH
          nil # gone already
        end
      end
      Process.wait(@pid)
    end
    [@to_browser, @from_browser].each { |io| io.close if io && !io.closed? }
    FileUtils.rm_rf(@dir)
  end

  private

  def call(method, params = {}, session: nil, timeout: 20)
    id = (@next_id += 1)
    message = { id: id, method: method, params: params }
    message[:sessionId] = session if session
    @to_browser.write(JSON.generate(message) + "\0")
    @to_browser.flush
    loop do
      m = read_message(timeout)
      next if m["id"] != id
      raise "#{method}: #{m["error"]["message"]}" if m["error"]

      return m["result"]
    end
  end

  def wait_event(name, timeout)
    if (i = @events.index { |e| e["method"] == name })
      return @events.delete_at(i)
    end
    loop do
      m = read_message(timeout)
      return m if m["method"] == name
    end
  end

  # the next message; events other than replies are kept (and network requests noted)
  def read_message(timeout)
    loop do
      if (nul = @buffer.index("\0"))
        m = JSON.parse(@buffer.slice!(0, nul + 1).chomp("\0"))
        if m["method"]
          @requests << m.dig("params", "request", "url") if m["method"] == "Network.requestWillBeSent"
          @events << m
        end
        return m
      end
      raise "no answer from chromium in #{timeout} s" unless IO.select([@from_browser], nil, nil, timeout)

      @buffer << @from_browser.readpartial(1 << 16)
    end
  end
end
