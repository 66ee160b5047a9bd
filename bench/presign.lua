-- wrk script: POST /v1/uploads with a bearer token from the environment.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("UPCOMMIT_BENCH_TOKEN")
wrk.body = '{"profile":"image","content_type":"image/png","size":1024,"filename":"a.png"}'
