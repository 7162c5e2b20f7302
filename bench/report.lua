-- wrk script: a CalDAV calendar-query REPORT over one month (June 2007).
wrk.method = "REPORT"
wrk.headers["Content-Type"] = "application/xml"
wrk.headers["Depth"] = "1"
wrk.body = [[<C:calendar-query xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop xmlns:D="DAV:"><D:getetag/><C:calendar-data/></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range start="20070601T000000Z" end="20070701T000000Z"/></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>]]

done = function(summary, latency, requests)
   local non2xx = summary.errors.status
   if non2xx > 0 then
      io.stderr:write(string.format("WARNING: %d non-2xx answers\n", non2xx))
   end
end
