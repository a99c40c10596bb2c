# ruff: noqa: E501
"""The inline stylesheet and script of the Gantt page (kept apart: minified lines run long).

The script draws every ``.mg-gantt`` element from the JSON of its ``data-src`` element (see
:func:`moeopt.viz.gantt.gantt_data` for the layout) and, once drawn, sets ``data-drawn`` on the
chart to the number of bars it painted (tests read that from the DOM).
"""

GANTT_CSS = """
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:16px;color:#222}
h1{font-size:20px;margin:0 0 8px} h2{font-size:16px;margin:20px 0 6px} h3{font-size:14px;margin:12px 0 4px}
table.mg{border-collapse:collapse;margin:4px 0 10px} table.mg td,table.mg th{border:1px solid #ddd;
padding:2px 8px;text-align:right} table.mg th{background:#f4f4f4} table.mg td.l,table.mg th.l{text-align:left}
pre.mg{background:#f7f7f7;padding:8px;overflow-x:auto}
.mg-gantt{position:relative;border:1px solid #ccc;padding:6px;margin:8px 0}
.mg-bar{margin-bottom:4px} .mg-bar label{margin-right:10px} .mg-view{color:#666;margin-left:8px}
.mg-legend span{display:inline-block;margin:0 10px 2px 0;white-space:nowrap}
.mg-legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
.mg-track h3 small{font-weight:normal;color:#666}
.mg-wrap{position:relative} .mg-wrap canvas{display:block} .mg-wrap canvas.mg-over{position:absolute;left:0;top:0}
.mg-tip{position:fixed;z-index:10;background:#fffff0;border:1px solid #999;padding:4px 6px;font:12px/1.35 monospace;
white-space:pre;pointer-events:none;box-shadow:2px 2px 4px rgba(0,0,0,.2)}
"""

GANTT_JS = r"""
(function(){
"use strict";
var LEFT=96, AXIS=18;
function fmt(x){return (Math.round(x*1000)/1000).toFixed(3);}
function natural(a,b){var ra=a.split(/(\d+)/),rb=b.split(/(\d+)/);
  for(var i=0;i<Math.min(ra.length,rb.length);i++){if(ra[i]===rb[i])continue;
    var na=i%2?+ra[i]:NaN,nb=i%2?+rb[i]:NaN; if(!isNaN(na)&&!isNaN(nb))return na-nb; return ra[i]<rb[i]?-1:1;}
  return ra.length-rb.length;}
function split(r){var k=r.lastIndexOf(".");return k<0?[r,""]:[r.slice(0,k),r.slice(k+1)];}
function ticks(t0,t1,px){var span=t1-t0,n=Math.max(2,Math.floor(px/90)),raw=span/n,
  p=Math.pow(10,Math.floor(Math.log10(raw))),m=raw/p,step=(m<1.5?1:m<3.5?2:m<7.5?5:10)*p,out=[];
  for(var t=Math.ceil(t0/step)*step;t<=t1+1e-9;t+=step)out.push(t);return {ts:out,step:step};}
function Chart(root){
  var D=JSON.parse(document.getElementById(root.getAttribute("data-src")).textContent);
  var S=D.strings,H=D.rowHeight,tip=root.querySelector(".mg-tip"),tracksEl=root.querySelector(".mg-tracks");
  var tmax=0; D.tracks.forEach(function(t){tmax=Math.max(tmax,t.makespan);}); if(!(tmax>0))tmax=1;
  var view={t0:0,t1:tmax*1.01},showWaits=false,order=D.rowOrder,self=this;
  var legend=root.querySelector(".mg-legend"),counts=D.legend;
  legend.textContent=D.key+": ";
  D.labels.forEach(function(lb,i){var s=document.createElement("span"),c=document.createElement("i");
    c.style.background=D.colors[i];s.appendChild(c);s.appendChild(document.createTextNode(lb+" ("+counts[i]+")"));
    legend.appendChild(s);});
  var T=D.tracks.map(function(t){
    var box=document.createElement("div"),h=document.createElement("h3"),wrap=document.createElement("div");
    box.className="mg-track";wrap.className="mg-wrap";
    h.textContent=t.title+" ";var sm=document.createElement("small");
    sm.textContent="makespan "+fmt(t.makespan)+" \u00b5s, "+t.events.length+" events on "+t.rows.length+" rows"+
      (t.policy?", policy "+t.policy:"")+(t.hidden?", "+t.hidden+" without resources not drawn":"");
    h.appendChild(sm);
    var cv=document.createElement("canvas"),ov=document.createElement("canvas");ov.className="mg-over";
    wrap.appendChild(cv);wrap.appendChild(ov);box.appendChild(h);box.appendChild(wrap);tracksEl.appendChild(box);
    var tr={d:t,cv:cv,ov:ov,pos:null,byRow:null,byLabel:null,hover:-1};
    layout(tr);
    bind(tr);return tr;});
  function layout(tr){
    var t=tr.d,n=t.rows.length,idx=[];for(var i=0;i<n;i++)idx.push(i);
    idx.sort(function(a,b){var A=split(t.rows[a]),B=split(t.rows[b]);
      return order==="role"?(natural(A[1],B[1])||natural(A[0],B[0])):(natural(A[0],B[0])||natural(A[1],B[1]));});
    tr.pos=new Array(n);idx.forEach(function(r,k){tr.pos[r]=k;});tr.order=idx;
    var byRow=[],byLabel=D.labels.map(function(){return [];});for(i=0;i<n;i++)byRow.push([]);
    for(var j=0;j<t.bars.length;j+=2){byRow[t.bars[j]].push(j);byLabel[t.events[t.bars[j+1]][3]].push(j);}
    tr.byRow=byRow;tr.byLabel=byLabel;}
  function size(tr){var w=Math.max(300,root.clientWidth-14),h=AXIS+tr.d.rows.length*H+2,r=window.devicePixelRatio||1;
    [tr.cv,tr.ov].forEach(function(c){c.width=Math.round(w*r);c.height=Math.round(h*r);c.style.width=w+"px";c.style.height=h+"px";});
    tr.w=w;tr.h=h;tr.r=r;}
  function x(tr,t){return LEFT+(t-view.t0)/(view.t1-view.t0)*(tr.w-LEFT-4);}
  function tAt(tr,px){return view.t0+(px-LEFT)/(tr.w-LEFT-4)*(view.t1-view.t0);}
  function draw(tr){
    size(tr);var c=tr.cv.getContext("2d"),t=tr.d,ev=t.events,b=t.bars,i,j;
    c.setTransform(tr.r,0,0,tr.r,0,0);c.clearRect(0,0,tr.w,tr.h);c.font="10px sans-serif";c.textBaseline="middle";
    for(i=0;i<t.rows.length;i++){var y=AXIS+tr.pos[i]*H;if(tr.pos[i]%2){c.fillStyle="#f6f6f6";c.fillRect(LEFT,y,tr.w-LEFT,H);}
      if(H>=8){c.fillStyle="#333";c.fillText(t.rows[i],2,y+H/2,LEFT-4);}}
    var tk=ticks(view.t0,view.t1,tr.w-LEFT);c.strokeStyle="#e0e0e0";c.fillStyle="#555";c.beginPath();
    tk.ts.forEach(function(tt){var px=Math.round(x(tr,tt))+0.5;c.moveTo(px,AXIS-4);c.lineTo(px,tr.h);
      c.fillText(+tt.toPrecision(6)+(tt===tk.ts[0]?" \u00b5s":""),px+2,AXIS/2-1);});c.stroke();
    c.save();c.beginPath();c.rect(LEFT,AXIS,tr.w-LEFT,tr.h-AXIS);c.clip();
    var pad=H>=6?1:0,bh=H-2*pad;tr.drawn=0;
    for(var l=0;l<tr.byLabel.length;l++){var L=tr.byLabel[l];if(!L.length)continue;c.fillStyle=D.colors[l];c.beginPath();
      for(i=0;i<L.length;i++){j=L[i];var e=ev[b[j+1]];if(e[2]<view.t0||e[1]>view.t1)continue;
        var x0=x(tr,e[1]),x1=x(tr,e[2]);c.rect(x0,AXIS+tr.pos[b[j]]*H+pad,Math.max(x1-x0,0.75),bh);tr.drawn++;}
      c.fill();}
    if(showWaits){c.strokeStyle="rgba(200,0,0,.75)";c.lineWidth=1;c.beginPath();
      for(j=0;j<b.length;j+=2){e=ev[b[j+1]];if(e[1]-e[4]<=1e-9||e[1]<view.t0||e[4]>view.t1)continue;
        var yy=Math.round(AXIS+tr.pos[b[j]]*H+H/2)+0.5;c.moveTo(x(tr,e[4]),yy);c.lineTo(x(tr,e[1]),yy);}
      c.stroke();}
    c.restore();overlay(tr);}
  function overlay(tr){var c=tr.ov.getContext("2d");c.setTransform(tr.r,0,0,tr.r,0,0);c.clearRect(0,0,tr.w,tr.h);
    if(tr.hover<0)return;var t=tr.d,e=t.events[tr.hover];c.strokeStyle="#000";c.lineWidth=1.5;
    for(var j=0;j<t.bars.length;j+=2){if(t.bars[j+1]!==tr.hover)continue;var x0=x(tr,e[1]),x1=x(tr,e[2]);
      c.strokeRect(x0-1,AXIS+tr.pos[t.bars[j]]*H,Math.max(x1-x0,0.75)+2,H);}}
  function hit(tr,px,py){
    var k=Math.floor((py-AXIS)/H);if(k<0||k>=tr.order.length||px<LEFT)return -1;
    var row=tr.byRow[tr.order[k]],t=tr.d,ev=t.events,b=t.bars,tt=tAt(tr,px),tol=(view.t1-view.t0)/(tr.w-LEFT)*3;
    var lo=0,hi=row.length;while(lo<hi){var m=(lo+hi)>>1;if(ev[b[row[m]+1]][1]<=tt+tol)lo=m+1;else hi=m;}
    var best=-1,bd=Infinity;for(var i=lo-1;i>=0&&i>=lo-64;i--){var e=ev[b[row[i]+1]];
      var d=tt<e[1]?e[1]-tt:tt>e[2]?tt-e[2]:0;if(d<bd){bd=d;best=b[row[i]+1];}if(d===0)break;}
    return bd<=tol?best:-1;}
  function text(tr,i){var e=tr.d.events[i],s=function(k){return k<0?"-":S[k];},L=[];
    L.push(S[e[0]]);L.push(D.key+": "+D.labels[e[3]]+"   on "+s(e[11]));
    L.push("start "+fmt(e[1])+"  end "+fmt(e[2])+"  duration "+fmt(e[2]-e[1])+" \u00b5s");
    if(e[10]===4){
      if(e[5]<0&&e[4]===e[1])L.push("no wait attribution recorded by this schedule");
      else{L.push("ready "+fmt(e[4])+" \u00b5s"+(e[5]>=0?" after "+S[e[5]]:" (source: no predecessor)"));
        L.push(e[1]-e[4]>1e-9?"started "+fmt(e[1]-e[4])+" \u00b5s after ready (cause not recorded by this schedule)"
          :"started when ready");}
      return L.join("\n");}
    L.push("ready "+fmt(e[4])+" \u00b5s"+(e[5]>=0?" after "+S[e[5]]:" (source: no predecessor)"));
    if(e[7]>0)L.push("waited "+fmt(e[7])+" \u00b5s for resource "+s(e[6]));
    if(e[9]>0)L.push("waited "+fmt(e[9])+" \u00b5s for semaphore "+s(e[8]));
    if(e[7]<=0&&e[9]<=0)L.push("no queueing: started when ready");
    L.push("start decided by: "+D.kinds[e[10]]);return L.join("\n");}
  function bind(tr){var drag=null;
    tr.ov.addEventListener("mousemove",function(ev){var r=tr.ov.getBoundingClientRect(),px=ev.clientX-r.left,py=ev.clientY-r.top;
      if(drag){var dt=(px-drag.x)/(tr.w-LEFT-4)*(drag.t1-drag.t0);view.t0=drag.t0-dt;view.t1=drag.t1-dt;redraw();return;}
      var i=hit(tr,px,py);if(i!==tr.hover){tr.hover=i;overlay(tr);}
      if(i<0){tip.hidden=true;return;}tip.textContent=text(tr,i);tip.hidden=false;
      var tx=ev.clientX+14,ty=ev.clientY+14;if(tx+tip.offsetWidth>window.innerWidth)tx=Math.max(0,ev.clientX-tip.offsetWidth-8);
      if(ty+tip.offsetHeight>window.innerHeight)ty=Math.max(0,ev.clientY-tip.offsetHeight-8);
      tip.style.left=tx+"px";tip.style.top=ty+"px";});
    tr.ov.addEventListener("mouseleave",function(){tip.hidden=true;drag=null;if(tr.hover>=0){tr.hover=-1;overlay(tr);}});
    tr.ov.addEventListener("mousedown",function(ev){var r=tr.ov.getBoundingClientRect();drag={x:ev.clientX-r.left,t0:view.t0,t1:view.t1};});
    window.addEventListener("mouseup",function(){drag=null;});
    tr.ov.addEventListener("dblclick",function(){view.t0=0;view.t1=tmax*1.01;redraw();});
    tr.ov.addEventListener("wheel",function(ev){ev.preventDefault();var r=tr.ov.getBoundingClientRect(),px=ev.clientX-r.left;
      var tt=tAt(tr,Math.max(px,LEFT)),f=Math.exp(ev.deltaY*0.0015),span=Math.max((view.t1-view.t0)*f,1e-6);
      var a=(tt-view.t0)/(view.t1-view.t0);view.t0=tt-a*span;view.t1=view.t0+span;redraw();},{passive:false});}
  function redraw(){var n=0;T.forEach(function(tr){draw(tr);n+=tr.drawn;});root.setAttribute("data-drawn",n);
    root.querySelector(".mg-view").textContent="view "+fmt(view.t0)+" \u2013 "+fmt(view.t1)+" \u00b5s";}
  var sel=root.querySelector(".mg-order");sel.value=order;sel.addEventListener("change",function(){order=sel.value;
    T.forEach(layout);redraw();});
  root.querySelector(".mg-waits").addEventListener("change",function(ev){showWaits=ev.target.checked;redraw();});
  root.querySelector(".mg-reset").addEventListener("click",function(){view.t0=0;view.t1=tmax*1.01;redraw();});
  window.addEventListener("resize",redraw);redraw();
  // a link to one event: page.html#event=NAME shows its hover text and outline at load
  var want=/[#&]event=([^&]*)/.exec(location.hash);
  if(want){want=decodeURIComponent(want[1]);T.some(function(tr){
    for(var i=0;i<tr.d.events.length;i++){if(S[tr.d.events[i][0]]!==want)continue;
      tr.hover=i;overlay(tr);tip.textContent=text(tr,i);tip.hidden=false;
      var e=tr.d.events[i],k=0;
      for(var j=0;j<tr.d.bars.length;j+=2)if(tr.d.bars[j+1]===i){k=tr.pos[tr.d.bars[j]];break;}
      var r=tr.ov.getBoundingClientRect();window.scrollTo(0,Math.max(0,r.top+window.scrollY+AXIS+k*H-window.innerHeight/3));
      r=tr.ov.getBoundingClientRect();
      tip.style.left=Math.max(0,r.left+x(tr,e[2])+8)+"px";tip.style.top=Math.max(0,r.top+AXIS+(k+1)*H)+"px";
      root.setAttribute("data-shown",want);return true;}
    return false;});}
}
document.querySelectorAll(".mg-gantt").forEach(function(el){new Chart(el);});
})();
"""
