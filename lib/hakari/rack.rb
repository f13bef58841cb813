# frozen_string_literal: true

require "hakari"

module Hakari
  # Rack middleware: every request's samples carry `endpoint` ("GET /users/:id") and `method`
  # labels, so a server's profile splits by endpoint (`go tool pprof -tagfocus=endpoint=...`,
  # `hakari report --group-by endpoint`). A label is a no-op while no profile runs, so the
  # middleware can stay in the stack for good.
  #
  #   use Hakari::Rack
  #   use Hakari::Rack, profile_secret: ENV["HAKARI_PROFILE_SECRET"]
  #
  # The endpoint is the route pattern when the router has put it in the env by the time the
  # middleware runs (`hakari.endpoint`, or Rails' `action_dispatch.route_uri_pattern`), else
  # the path with its id-like segments (numbers, UUIDs, hex digests) written `:id`.
  #
  # profile_secret: a request whose `X-Hakari-Profile` header equals the secret (compared in
  # constant time) is profiled on its own, in wall mode, and answered with the profile
  # (pprof, gzipped) instead of the app's body; any other request is served as usual. Without
  # a secret (the default) there is no such switch: never expose one on a public server.
  class Rack
    SECRET_HEADER = "HTTP_X_HAKARI_PROFILE"
    MIN_SECRET_BYTES = 16
    # a segment that names one record, not a route: digits, a UUID, or hex of 8+ with a digit
    ID_SEGMENT = /\A(?:\d+|\h{8}-\h{4}-\h{4}-\h{4}-\h{12}|(?=\h*\d)\h{8,})\z/

    def initialize(app, profile_secret: nil)
      unless profile_secret.nil? || (profile_secret.is_a?(String) && profile_secret.bytesize >= MIN_SECRET_BYTES)
        raise ArgumentError, "invalid profile_secret #{profile_secret.class} (expected nil, or a String of at least " \
                             "#{MIN_SECRET_BYTES} bytes)"
      end

      @app = app
      @secret = profile_secret
    end

    def call(env)
      return profile_request(env) if @secret && requested?(env)

      labelled(env) { @app.call(env) }
    end

    # the request's route: the router's pattern when known, else its path with ids collapsed
    def self.route(env)
      pattern = env["hakari.endpoint"] || env["action_dispatch.route_uri_pattern"]
      return pattern.to_s.delete_suffix("(.:format)") if pattern

      path = "#{env["SCRIPT_NAME"]}#{env["PATH_INFO"]}"
      path = "/" if path.empty?
      path.split("/", -1).map { |seg| ID_SEGMENT.match?(seg) ? ":id" : seg }.join("/")
    end

    private

    def requested?(env)
      given = env[SECRET_HEADER]
      given.is_a?(String) && given.bytesize == @secret.bytesize && secure_equal?(given, @secret)
    end

    def secure_equal?(a, b)
      diff = 0
      a.bytes.zip(b.bytes) { |x, y| diff |= x ^ y }
      diff.zero?
    end

    # this request alone, profiled; its response's body is the profile
    def profile_request(env)
      if Hakari.running?
        return [409, { "content-type" => "text/plain" }, ["hakari: a profile is already running in this process\n"]]
      end

      status = nil
      profile = Hakari.start(mode: :wall) do
        status, _headers, body = call_labelled(env)
        body.close if body.respond_to?(:close)
      end
      [200, { "content-type" => "application/octet-stream", "x-hakari-status" => status.to_s,
              "content-disposition" => %(attachment; filename="hakari-#{Process.pid}.pb.gz") }, [profile.encode(:pprof)]]
    end

    # the block with the request's endpoint and method labels
    def labelled(env, &block)
      method = env["REQUEST_METHOD"].to_s
      Hakari.label(endpoint: "#{method} #{Rack.route(env)}", method: method, &block)
    end

    def call_labelled(env)
      labelled(env) do
        status, headers, body = @app.call(env)
        body.each { |_| nil } if body.respond_to?(:each) # the body's work is the request's too
        [status, headers, body]
      end
    end
  end
end
